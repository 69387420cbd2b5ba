"""SA-ATP controller: pipeline, job lifecycle, membership, counters and reconciliation over
P4Runtime. ``controls/`` has one class per P4 control of p4src/, each owning that control's
entries; :class:`control_plane.controller.Controller` composes them."""
