"""Scheduling: who computes which samples and how each worker takes part in a call. The
straggler policies behind one interface (``policies/``), work stealing within an iteration
(``work_stealing``) and the global-batch sampler (``sampling``)."""
