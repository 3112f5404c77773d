-- Who asked for a change (docs/architecture.md, "Events"): `api_key:key_…` for a write
-- made through the API, NULL for the engine's own events.
-- (PostgreSQL twin of appliance/store/infra/migrations/0008_event_actor.sql; rules in 0001.)
ALTER TABLE events ADD COLUMN actor TEXT COLLATE "C";
