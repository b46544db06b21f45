"""The recall API: what agents and the OpenClaw bridge call."""
