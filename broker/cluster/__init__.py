"""How a broker takes part in a cluster: its line to the controller, registration and heartbeats."""
