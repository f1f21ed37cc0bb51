"""The proxy's toxics and schedules: the models live in ``harness.scenario.toxics``.

A scenario declares a TCP dependency's phases with the same toxics, and the
scenario's layer is below the proxy's (pyproject.toml ``[tool.importlinter]``),
so the models moved down there; this module keeps the proxy's own names.
"""

from harness.scenario.toxics import HOLD_LIMIT_S as HOLD_LIMIT_S
from harness.scenario.toxics import BandwidthToxic as BandwidthToxic
from harness.scenario.toxics import Direction as Direction
from harness.scenario.toxics import LatencyToxic as LatencyToxic
from harness.scenario.toxics import LimitDataToxic as LimitDataToxic
from harness.scenario.toxics import ProxyConfigError as ProxyConfigError
from harness.scenario.toxics import ProxyPhase as ProxyPhase
from harness.scenario.toxics import ResetPeerToxic as ResetPeerToxic
from harness.scenario.toxics import Schedule as Schedule
from harness.scenario.toxics import SlicerToxic as SlicerToxic
from harness.scenario.toxics import SlowCloseToxic as SlowCloseToxic
from harness.scenario.toxics import Stream as Stream
from harness.scenario.toxics import TimeoutToxic as TimeoutToxic
from harness.scenario.toxics import Toxic as Toxic
from harness.scenario.toxics import ToxicSet as ToxicSet
from harness.scenario.toxics import check_toxics as check_toxics
from harness.scenario.toxics import load_schedule as load_schedule
from harness.scenario.toxics import load_schedule_text as load_schedule_text
