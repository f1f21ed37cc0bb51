"""Phase caps on the target (``pg.phases[].target``): a build's cgroup, the Engine's update,
and the clock that applies and lifts them (``schedule``)."""
