"""What a run leaves on disk and reads back: events, the store, outputs, history, secrets."""
