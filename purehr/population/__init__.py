"""Population-based training inside the compiled call (docs/pbt.md): the settings, the
exploit/explore step on the population axis, and one task's step as the checkpoint runs it."""

from purehr.population.settings import DEFAULT_BOUNDS, FITNESS_RULES, PBTSettings
from purehr.population.step import PopulationStep, population_key

__all__ = ["DEFAULT_BOUNDS", "FITNESS_RULES", "PBTSettings", "PopulationStep", "population_key"]
