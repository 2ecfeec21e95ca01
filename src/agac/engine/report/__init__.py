"""The run report: what a run says, typed from where it is built (from the store, never
from memory) to where it is printed. One frozen tree split by concept — :mod:`.counts`
(units per action), :mod:`.waiting` (batches out, files not sent, approvals, unknown
effects), :mod:`.advice` (a dominant failure and its fix), :mod:`.budget`, :mod:`.hybrid`
(hybrid switches, ``run_mode: auto`` choices), :mod:`.checks` (pass rates), :mod:`.run`
(the summary and its next command), :mod:`.status` (``agac status`` and the service's run
page) and :mod:`.cost` (``agac cost``). Its JSON is made in one place, :mod:`.jsondoc`,
at the ``--json`` and HTTP edges.

The report reads the store and the run's graph; it never imports the lifecycle or the
views, so the lifecycle (which returns a run's summary) and every reader depend on it one
way. Import from the submodules: this package imports none of them, so the ``--json``
edge (:mod:`.jsondoc`) stays light."""
