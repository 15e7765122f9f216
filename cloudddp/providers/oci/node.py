"""What every node of an OCI job runs: a short container entrypoint, and the node script it unpacks.

OCI Data Science refuses a container whose CMD and ENTRYPOINT together reach 2,048 bytes
(oci SDK 2.189.0, `oci.data_science.models.OcirContainerJobEnvironmentConfigurationDetails`,
docstrings of `cmd` and `entrypoint`: "The combined size of `CMD` and `ENTRYPOINT` must be
less than 2048 bytes."). So the entrypoint only unpacks the staged source archive onto the
node's block volume and hands over to `cloudddp_node.sh`, which travels inside that archive
(`NODE_SCRIPT`); what is left of the 2,048 bytes goes to the script's arguments (CMD).

The node script (POSIX sh, so any image with python3 works): runs `cloudddp_bootstrap.py`
(the launcher reads NODE_RANK, INITIAL_CLUSTER_SIZE and the cluster metadata file), prefixes
every output line with `[node-<rank>]` so the logs say which node wrote them, forwards
SIGTERM (its trap is set first, so a stop during start-up is never lost), and at exit, failed or not, copies its own log to `output/logs/node-<rank>.log`
(readable with OCI Logging off), its metrics history, where the job asked for one, to `output/metrics/`, and, on node 0, the model folder to the output mount. Its
last line is `EXIT_MARKER`. There is no sleep at exit.

Pure: no SDK.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

NODE_SCRIPT_NAME = "cloudddp_node.sh"
MAX_COMMAND_BYTES = 2048  # CMD + ENTRYPOINT must stay below this (see above)

# CLOUDDDP_NODE_ROOT (default: the job's block volume at /home/datascience) is node-local
# scratch: the unpacked source, the model and checkpoint folders.
ENTRYPOINT_SCRIPT = (
    'r="${CLOUDDDP_NODE_ROOT:-/home/datascience/cloudddp}";'
    'mkdir -p "$r/code" 2>/dev/null||r="${TMPDIR:-/tmp}/cloudddp";'
    'mkdir -p "$r/code"&&tar -xzf "$CLOUDDDP_SOURCE" -C "$r/code"||{ '
    'echo "[node-${NODE_RANK:-0}] cloudddp: cannot unpack $CLOUDDDP_SOURCE (is the Object Storage mount there?)";'
    "exit 2;};"
    f'export CLOUDDDP_NODE_ROOT="$r";exec sh "$r/code/{NODE_SCRIPT_NAME}" "$@"'
)
# `sh -c SCRIPT NAME ARGS...`: NAME becomes $0, the job's CMD (the script's arguments) "$@".
ENTRYPOINT = ["/bin/sh", "-c", ENTRYPOINT_SCRIPT, "cloudddp-node"]

NODE_SCRIPT = r"""root="$CLOUDDDP_NODE_ROOT"
rank="${NODE_RANK:-0}"
child=; stopping=
trap 'stopping=1; [ -z "$child" ] || kill -TERM "$child" 2>/dev/null' TERM INT
say() { printf '[node-%s] cloudddp: %s\n' "$rank" "$*"; }
export PYTHONUNBUFFERED=1 CLOUDDDP_MODEL_DIR="${CLOUDDDP_MODEL_DIR:-$root/model}"
export CLOUDDDP_CHECKPOINT_DIR="${CLOUDDDP_CHECKPOINT_DIR:-$root/checkpoints}"
mkdir -p "$CLOUDDDP_MODEL_DIR" "$CLOUDDDP_CHECKPOINT_DIR" || exit 2
py="$(command -v python3 || command -v python)" || { say "the image has no python3"; exit 2; }
cd "$root/code" || exit 2
if [ -n "$stopping" ]; then say "stopped before the training started"; say "node $rank exited with code 143"; exit 143; fi
fifo="$root/output.fifo"; rm -f "$fifo"; mkfifo "$fifo" || exit 2
while IFS= read -r line || [ -n "$line" ]; do printf '[node-%s] %s\n' "$rank" "$line"; printf '%s\n' "$line" >&3; done < "$fifo" 3>>"$root/node.log" & reader=$!
"$py" cloudddp_bootstrap.py "$@" > "$fifo" 2>&1 & child=$!
[ -z "$stopping" ] || kill -TERM "$child" 2>/dev/null
wait "$child"; code=$?
while kill -0 "$child" 2>/dev/null; do wait "$child"; code=$?; done
wait "$reader"
if [ -n "${CLOUDDDP_OUTPUT_DIR:-}" ]; then
  mkdir -p "$CLOUDDDP_OUTPUT_DIR/logs" && cp "$root/node.log" "$CLOUDDDP_OUTPUT_DIR/logs/node-$rank.log" || say "could not copy this node's log to $CLOUDDDP_OUTPUT_DIR/logs"
  for f in "$root"/metrics-*.jsonl; do [ ! -f "$f" ] || { mkdir -p "$CLOUDDDP_OUTPUT_DIR/metrics" && cp "$f" "$root/metric-definitions.json" "$CLOUDDDP_OUTPUT_DIR/metrics/"; } || say "could not copy the metrics history to $CLOUDDDP_OUTPUT_DIR/metrics"; done
  if [ "$rank" = 0 ]; then
    if cp -R "$CLOUDDDP_MODEL_DIR/." "$CLOUDDDP_OUTPUT_DIR/"; then say "copied the model folder to $CLOUDDDP_OUTPUT_DIR"; else say "could not copy the model folder to $CLOUDDDP_OUTPUT_DIR"; fi
  fi
fi
say "node $rank exited with code $code"
exit "$code"
"""
# The last line every node writes; logs.py stops following once each node has written it.
EXIT_MARKER = r"cloudddp: node (\d+) exited with code (-?\d+)"


def command_bytes(entrypoint: Sequence[str], cmd: Sequence[str] | None) -> int:
    """The size the 2,048-byte rule is checked against.

    The SDK does not say how "combined size" is counted, so this counts the larger
    reading: both lists as the compact JSON arrays the request carries (every string
    UTF-8 encoded, with its quotes, escapes and separators).
    """
    return sum(
        len(json.dumps(list(part), separators=(",", ":"), ensure_ascii=False).encode())
        for part in (entrypoint, cmd or [])
    )
