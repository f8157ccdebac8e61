"""What a worker does with a notification: dispatch, retry timing, and the sweeper."""
