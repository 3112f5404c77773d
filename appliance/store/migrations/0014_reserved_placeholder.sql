-- Placeholder: migration number reserved for another branch (resend12 uses 0016 only).
-- Delete this file when that branch's 0014 is merged.
SELECT 1;
