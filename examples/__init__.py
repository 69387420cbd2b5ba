"""Runnable examples: training on the digits data set through gloo or the switch, and the
README's main job."""
