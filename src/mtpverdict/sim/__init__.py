"""Campaign simulator: synthetic results with boot-to-boot and run-to-run variance, drift and controls.

Pure: a Scenario and an explicit numpy Generator in, a campaign dict and its records out. Used for the
synthetic fixtures, the calibration of the decision rules (false-promotion rate, power) and `plan`.
Everything it produces is labelled synthetic. One module per section: `campaign` (the scenario model
and the campaign generator), `scenarios` (the fixtures' truths), `config` (scenarios from TOML or the
command line, validated through formats/_check), `calibrate` (the decision engine over many
campaigns), `boots` (vectorised boot-level statistics), `chain` (chained acceptance).
"""

from mtpverdict.sim.boots import (
    BootArm,
    BootBatch,
    BootScenario,
    boot_orders,
    device_positions,
    simulate_boots,
)
from mtpverdict.sim.calibrate import Calibration, calibrate, combine
from mtpverdict.sim.campaign import (
    SIMULATED_ENGINE,
    Scenario,
    SimArm,
    SimBoot,
    boot_schedule,
    sim_layout,
    simulate_campaign,
)
from mtpverdict.sim.chain import ChainModel, simulate_chain
from mtpverdict.sim.config import (
    DEFAULT_ARMS,
    DEFAULT_SEED,
    Simulation,
    parse_arm,
    parse_effect,
    simulate,
    simulation_from_mapping,
)
from mtpverdict.sim.scenarios import SCENARIOS

__all__ = [
    "DEFAULT_ARMS",
    "DEFAULT_SEED",
    "SCENARIOS",
    "SIMULATED_ENGINE",
    "BootArm",
    "BootBatch",
    "BootScenario",
    "Calibration",
    "ChainModel",
    "Scenario",
    "SimArm",
    "SimBoot",
    "Simulation",
    "boot_orders",
    "boot_schedule",
    "calibrate",
    "combine",
    "device_positions",
    "parse_arm",
    "parse_effect",
    "sim_layout",
    "simulate",
    "simulate_boots",
    "simulate_campaign",
    "simulate_chain",
    "simulation_from_mapping",
]
