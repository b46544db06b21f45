"""System alerts: the background monitor that runs the rules (core/alerts.py) over stored events."""
