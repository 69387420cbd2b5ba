"""What a user reads and copies: the README's main job (``main_job``), a job spec
(``jobs/four_workers.toml``) and a Tofino switch config (``tofino/switch.toml``). The harness
they build on is ``experiments/``."""
