"""The Circuits page's part of the Attention tab's state (:class:`CircuitsState`, a base of
:class:`~app.views.attention.state.AttentionState`): the weights' circuits, one head's full circuits, the
path patching of a sender and the page's inputs (sender, receiver, RoPE offset), with their two
signals. It reads the state's ``inspection``, ``request`` and ``causal_setup`` (which
``AttentionState.__init__`` sets). No Qt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.core.state import Signal
from app.views.attention.state_records import CausalEntry, CircuitsKey, Edge, Head

if TYPE_CHECKING:
    from model.interp.inspection import Inspection
    from model.interp.measures import CircuitsResult, HeadCircuitDetail


class CircuitsState:
    """What the Circuits page reads and sets (see the module docstring)."""

    #: (kind, result): a result of the Circuits page arrived: ``"circuits"`` (the weights' circuits,
    #: :class:`~model.interp.measures.CircuitsResult`), ``"head"`` (one head's full circuits) or
    #: ``"path"`` (path patching of the sender, or a :class:`CausalFailure`)
    circuits_changed = Signal()
    #: (): the Circuits page's inputs changed (the sender, the receiver, the RoPE offset)
    circuit_setup_changed = Signal()

    # the rest of the state, which AttentionState.__init__ sets
    inspection: Inspection | None
    request: int
    causal_setup: dict[str, dict[str, Any]]

    def __init__(self) -> None:
        #: (key, CircuitsResult) of the weights (key: the model, its step and the RoPE offset, which
        #: the tab's jobs decide), (key, (layer, head), HeadCircuitDetail) of one head, and the path
        #: patching of a sender (a CausalEntry whose setup holds the Patching page's inputs and the
        #: sender)
        self.circuits: tuple[CircuitsKey, CircuitsResult] | None = None
        self.circuit_head: tuple[CircuitsKey, Head, HeadCircuitDetail] | None = None
        self.path: CausalEntry | None = None
        #: the inputs: ``sender`` / ``receiver`` (layer, head) of path patching (None: the strongest
        #: composition's), ``rope_offset`` (RoPE models: the query − key offset of the QK circuits)
        self.circuit_setup: dict[str, Any] = {"sender": None, "receiver": None, "rope_offset": 0}

    def set_circuits(self, key: CircuitsKey, result: CircuitsResult) -> None:
        """The circuits (:class:`~model.interp.measures.CircuitsResult`) of the weights ``key`` names."""
        self.circuits = (key, result)
        self.circuits_changed.emit("circuits", result)

    def circuits_for(self, key: CircuitsKey) -> CircuitsResult | None:
        """The circuits of the weights ``key`` names, or None (not computed yet)."""
        c = self.circuits
        return c[1] if c is not None and c[0] == key else None

    @property
    def circuits_result(self) -> CircuitsResult | None:
        """The latest circuits (:class:`~model.interp.measures.CircuitsResult`), or None."""
        return self.circuits[1] if self.circuits is not None else None

    def strongest_edge(self) -> Edge | None:
        """(kind, writer, reader, score) of the strongest composition of the latest circuits, or None."""
        res = self.circuits_result
        got = getattr(res, "circuits", None)
        if got is None:
            return None
        top = got.composition.strongest(top=1)
        return top[0] if top else None

    def path_heads(self) -> tuple[Head, Head | None]:
        """(sender, receiver) of path patching: the chosen ones, else the strongest composition's (a
        chosen sender's: the head its output feeds most), else L0H0 and the first head of layer 1
        (no receiver in a one-layer model)."""
        edge = self.strongest_edge()
        insp = self.inspection
        L = insp.n_layers if insp is not None else 1
        sender = self.circuit_setup["sender"] or (edge[1] if edge else (0, 0))
        receiver = self.circuit_setup["receiver"]
        if receiver is None or receiver[0] <= sender[0] or receiver[0] >= L:
            receiver = None
            got = getattr(self.circuits_result, "circuits", None)
            feeds = got.composition.writes_to(*sender, 1) if got is not None else []
            if feeds:
                receiver = feeds[0][1]  # the head its output feeds most
        if receiver is None and sender[0] + 1 < L:
            receiver = (sender[0] + 1, 0)
        chosen = (int(sender[0]), int(sender[1]))
        return chosen, ((int(receiver[0]), int(receiver[1])) if receiver is not None else None)

    def set_circuit_setup(self, **values) -> bool:
        """Change the Circuits page's inputs (keys of :attr:`circuit_setup`); returns whether they
        changed. A new sender keeps its receiver only when it is in a later layer."""
        setup = {**self.circuit_setup, **values}
        if setup == self.circuit_setup:
            return False
        self.circuit_setup = setup
        self.circuit_setup_changed.emit()
        return True

    def set_circuit_head(self, key: CircuitsKey, head: Head, detail: HeadCircuitDetail) -> None:
        """One head's full circuits (:class:`~model.interp.measures.HeadCircuitDetail`) for ``key``."""
        self.circuit_head = (key, (int(head[0]), int(head[1])), detail)
        self.circuits_changed.emit("head", detail)

    def circuit_head_for(self, key: CircuitsKey | None, head: Head) -> HeadCircuitDetail | None:
        """The full circuits of ``head`` for the weights ``key`` names, or None."""
        e = self.circuit_head
        return e[2] if e is not None and e[0] == key and e[1] == (int(head[0]), int(head[1])) else None

    def path_setup(self) -> dict:
        """What a path patching result depends on besides the run: the Patching page's inputs, the
        sender and the receiver's layer (its heads are measured together; None: no later layer)."""
        sender, receiver = self.path_heads()
        layer = receiver[0] if receiver is not None else None
        return {**self.causal_setup["patching"], "sender": sender, "layer": layer}

    def set_path(self, request: int, setup: dict, result: object) -> bool:
        """Keep a path patching ``result`` measured for run ``request`` with ``setup``
        (:meth:`path_setup`); False (dropped) when the inputs changed meanwhile."""
        if setup != self.path_setup():
            return False
        self.path = CausalEntry(request, dict(setup), result)
        self.circuits_changed.emit("path", result)
        return True

    def path_for_current(self):
        """Path patching of the current run, inputs and sender, or None (not measured yet)."""
        e, insp = self.path, self.inspection
        if e is None or insp is None or e.request != self.request or e.setup != self.path_setup():
            return None
        return e.result
