"""Which variables claim a node for a platform, and the one rule for a node that has only some of them.

Every platform module declares `CLAIMS`: one `Claim` per contract it reads (OCI has three: the native multi-node
job run, ADS's multi-run jobs and the legacy `ads opctl` clusters). A claim names the variables the platform sets
together on every node of a multi-node job (`needs`) and those of them (or beside them) that no other software
sets (`markers`). The rule, applied to every platform alike (`cloudddp.cluster.resolve_plan`):

- a marker set claims the node for that platform, whether or not the platform's `detect` recognises it;
- a claimed node missing any of the claim's `needs` is refused: exit 2, one paragraph naming a missing variable,
  never a one-node standalone run (each node training alone, exit 0, was the failure this prevents);
- generic names (NODE_RANK, RANK, MASTER_ADDR) are needs, never markers: alone they claim nothing.

Standard library only: this runs inside training images.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from cloudddp.errors import CloudDDPError

ESCAPE = (
    "Refusing to plan a one-node run. Set the missing variable, or name the platform this node runs on with "
    "--provider (or CLOUDDDP_PROVIDER; --provider standalone for one node alone)."
)


def is_set(environ: Mapping[str, str], name: str) -> bool:
    return environ.get(name, "") != ""


def listed(names: tuple[str, ...]) -> str:
    """`A, B and C`."""
    return " and ".join(filter(None, (", ".join(names[:-1]), names[-1])))


@dataclass(frozen=True)
class Claim:
    """One contract of a platform: the variables it sets together on every node of a multi-node job."""

    platform: str  # the module's NAME
    contract: str  # in the message: "a SkyPilot multi-node task"
    needs: tuple[str, ...]  # all set (or a stand-in of each), else the node is refused
    markers: tuple[str, ...] = ()  # any of these set claims the node; default: every need
    stand_ins: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # another name that supplies a need
    upstream: str = ""  # where the contract is written (repository, file, commit)
    # The contract met another way (SageMaker: resourceconfig.json, which bring-your-own images get instead).
    met_otherwise: Callable[[Mapping[str, str]], bool] | None = None

    @property
    def claimed_by(self) -> tuple[str, ...]:
        return self.markers or self.needs

    def names(self, need: str) -> tuple[str, ...]:
        """A need and the names that stand in for it."""
        return (need, *self.stand_ins.get(need, ()))

    def made(self, environ: Mapping[str, str]) -> bool:
        """Whether a marker of this claim is set: the node belongs to this contract."""
        return any(is_set(environ, name) for name in self.claimed_by)

    def missing(self, environ: Mapping[str, str]) -> list[str]:
        """The needs that neither they nor a stand-in supply."""
        return [need for need in self.needs if not any(is_set(environ, name) for name in self.names(need))]

    def complete(self, environ: Mapping[str, str]) -> bool:
        return self.made(environ) and not self.missing(environ)

    def described(self, need: str) -> str:
        stand_ins = self.stand_ins.get(need, ())
        return f"{need} (or {' or '.join(stand_ins)})" if stand_ins else need

    def missing_words(self, environ: Mapping[str, str]) -> str:
        missing = self.missing(environ)
        words = " and ".join(self.described(name) for name in missing)
        return f"{words} {'is' if len(missing) == 1 else 'are'} not set"

    def error(self, environ: Mapping[str, str], others: tuple[Claim, ...] = ()) -> CloudDDPError:
        """The one paragraph for a node that has some of this claim's variables and lacks others (`others`: the
        platform's other contracts this node also has variables of)."""
        found = [f"{name}={environ[name]!r:.80}" for name in (*self.claimed_by, *self.needs) if is_set(environ, name)]
        found = list(dict.fromkeys(found))
        whose = f"has variables of {self.contract} ({', '.join(found)})" if found else f"is planned as {self.contract}"
        alternatives = "".join(f" As {other.contract}, {other.missing_words(environ)}." for other in others)
        return CloudDDPError(
            f"{self.platform}: this node {whose}, but {self.missing_words(environ)}; {self.platform} sets "
            f"{listed(self.needs)} together on every node.{alternatives} {ESCAPE}"
        )


def made_claims(claims: tuple[Claim, ...], environ: Mapping[str, str]) -> list[Claim]:
    return [claim for claim in claims if claim.made(environ)]


def partial_claim(claims: tuple[Claim, ...], environ: Mapping[str, str]) -> Claim | None:
    """The claim a node of this platform breaks: some of the platform's `claims` are made and none is complete (the
    one with the fewest missing variables, in declared order); None when the node is whole or not claimed."""
    made = made_claims(claims, environ)
    if not made or any(not claim.missing(environ) for claim in made):
        return None
    if any(claim.met_otherwise and claim.met_otherwise(environ) for claim in made):
        return None
    return min(made, key=lambda claim: len(claim.missing(environ)))


def require_whole(claims: tuple[Claim, ...], environ: Mapping[str, str]) -> None:
    """The shared rule: a node claimed by a platform has all the variables of one of its contracts (`claims`)."""
    broken = partial_claim(claims, environ)
    if broken is not None:
        raise broken.error(environ, tuple(c for c in made_claims(claims, environ) if c is not broken))
