"""Effects: each carries out one decision as ONE guarded API call, and never decides.

Dry-run never reaches this package: the decision core turns it into Events only.
"""

from lifecycle_controller.controller.actions.delete import delete_object
from lifecycle_controller.controller.actions.patch import patch_object
from lifecycle_controller.controller.actions.restart import rollout_blockers

__all__ = ["delete_object", "patch_object", "rollout_blockers"]
