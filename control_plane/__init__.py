"""SA-ATP controller: pipeline, job lifecycle, membership, counters and reconciliation, over
P4Runtime (``controller.py``: bmv2, the embedded target) or BF Runtime (``tofino/``: the TNA
program). ``controls/`` has one class per P4 control of p4src/, each owning that control's
entries; :class:`control_plane.plan.Plan` composes the table controls into what the switch
should hold, and ``switch_controller.SwitchController`` drives a switch to it through a backend
(``contracts.py`` says what a backend provides)."""
