"""The APIs the server speaks, one module each: its request mapped to the chat or completion request
schema.py checks, its route's handler, and the writer of its answer shapes (whole and streamed)."""
