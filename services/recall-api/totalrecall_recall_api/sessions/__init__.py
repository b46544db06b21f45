"""What agents leave to memory beyond their events: session bundles and summaries, the conclusions of
conversation turns, learned user patterns, and the action ledger."""
