"""Where the switch and the workers run: a switch process (bmv2 or the embedded target), the
no-root local cluster (workers as processes on loopback UDP tunnels), and Mininet topologies."""
