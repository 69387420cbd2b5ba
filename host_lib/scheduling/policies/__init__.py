"""Straggler policies behind one interface (:class:`host_lib.scheduling.policies.base.Policy`): each
iteration, from every worker's measured compute times, who computes how many samples, who
contributes, what the switch waits for, and who may take whose slots over."""
