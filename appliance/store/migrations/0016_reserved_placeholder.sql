-- Placeholder on branch warn12 only: migration 0016 belongs to another branch. Delete this
-- file when merging (the real 0016 takes its place; warn12's migration is 0018).
SELECT 1;
