-- Who asked for a change (docs/architecture.md, "Events"): `api_key:key_…` for a write
-- made through the API, NULL for the engine's own events.
ALTER TABLE events ADD COLUMN actor TEXT;
