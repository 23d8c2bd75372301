"""Schedules: representation, primitives, legality, automatic scheduling."""
from .schedule import Dim, LoopKind, Schedule, Unroll
