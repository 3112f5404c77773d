-- Placeholder: migration number 0014 is reserved for a change developed in parallel.
-- Drop this file when that migration is merged (migrations are numbered without gaps).
SELECT 1;
