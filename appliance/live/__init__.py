"""Live streams of the event feed (Server-Sent Events) for the API and the web UI: the hub
that follows the ``events`` table, and the caps on how many streams may be open."""
