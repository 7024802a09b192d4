"""Registry keys for this project's Vidur extensions (>= 100: never equal to Vidur's own)."""

from simulator.vidur.configs import BaseIntEnum


class ExtensionType(BaseIntEnum):
    PROFILE_FOREST = 100  # execution-time predictor
    SPEC_SARATHI = 101  # replica scheduler
    WORKLOAD = 102  # request generator
    TRACKED_SARATHI = 103  # replica scheduler without speculation
    ANALYTIC = 104  # execution-time predictor of the built-in profile: whole steps from the step-time model
