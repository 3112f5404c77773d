-- The pruner deletes a body once no run refers to it: that lookup needs this index.
CREATE INDEX job_runs_body ON job_runs(body_digest);
