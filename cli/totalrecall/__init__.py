"""The `totalrecall` command and the launchers of the local stack."""
