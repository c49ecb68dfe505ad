#!/usr/bin/env bash
# heat2d under MPI: 4 MPI ranks on 4 simulated nodes checkpoint at L1, L2,
# L3, L4 in turn; the job is SIGKILLed (mpirun and every rank) while the L4
# checkpoint is being written; node 2's local storage is deleted; mpirun
# relaunches the job, which must restart from the L3 checkpoint (rebuilt by
# Reed-Solomon decoding) and end bit-identical to an in-process reference.
# Further sections: rotated L3 parity, a relaunch on 3 ranks, background
# post-processing (-async) and FTI heads (-heads, 8 processes on 4 nodes),
# the heads also under MPICH (4 processes on 2 nodes); every other section
# runs under Open MPI.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
work=$(mktemp -d)
trap 'pkill -9 -f "$work/heat2d-mpi" 2>/dev/null || true; rm -rf "$work"' EXIT

# kill_when EVENT LOG PID: wait (up to 120 s) until LOG has the line EVENT,
# then SIGKILL mpirun PID and every rank; fail if the job ends before.
kill_when() {
  for _ in $(seq 1 1200); do
    if grep -q "$1" "$2"; then break; fi
    if ! kill -0 "$3" 2>/dev/null; then echo "the job ended before \"$1\""; cat "$2"; exit 1; fi
    sleep 0.1
  done
  grep -q "$1" "$2" || { echo "no \"$1\" within 120 s"; cat "$2"; exit 1; }
  pkill -9 -f "$work/heat2d-mpi" || true
  kill -9 "$3" 2>/dev/null || true
  wait "$3" 2>/dev/null || true
  while pgrep -f "$work/heat2d-mpi" > /dev/null; do sleep 0.1; done
}

go build -tags mpi -o "$work/heat2d-mpi" ./examples/heat2d
go build -o "$work/heat2d" ./examples/heat2d
args=(-role=job -ranks 4 -nodes 4 -nx 128 -ny 128 -iters 2000 -frame-every 100)

# Reference: the same solver, uninterrupted, in-process, no checkpoints.
"$work/heat2d" "${args[@]}" -dir "$work/ref" -ckpt-every 0 -levels 1 > /dev/null

# Launch 1, with slow global storage so the kill lands inside L4.
mpirun.openmpi -np 4 -x GOMAXPROCS=1 "$work/heat2d-mpi" "${args[@]}" -dir "$work/run" \
  -ckpt-every 250 -levels 1,2,3,4 -global-latency 50ms > "$work/launch1.log" 2>&1 &
mpipid=$!
kill_when "EVENT ckpt-begin id=4 level=4" "$work/launch1.log" "$mpipid"
echo "launch 1 killed with SIGKILL during the L4 checkpoint:"
grep EVENT "$work/launch1.log"
if grep -q "EVENT ckpt-end id=4" "$work/launch1.log"; then echo "the L4 checkpoint finished before the kill"; exit 1; fi
test ! -e "$work/run/final.f64"

rm -rf "$work/run/local/node0002"
echo "lost node: deleted $work/run/local/node0002"

mpirun.openmpi -np 4 -x GOMAXPROCS=1 "$work/heat2d-mpi" "${args[@]}" -dir "$work/run" \
  -ckpt-every 250 -levels 1,2,3,4 > "$work/launch2.log" 2>&1 || { cat "$work/launch2.log"; exit 1; }
echo "launch 2:"
grep EVENT "$work/launch2.log"
grep -q "EVENT start status=restart id=3 level=3 iter=750 oldranks=4 ranks=4 nodefiles=.*" "$work/launch2.log" \
  || { echo "launch 2 did not restart from the L3 checkpoint"; exit 1; }
grep -q "EVENT done iter=2000" "$work/launch2.log"
cmp "$work/ref/final.f64" "$work/run/final.f64"
echo "heat2d under MPI: restarted from L3 after a kill and a lost node; final field bit-identical"

# Rotated L3 parity (l3_parity = 2 of a group of 4, SCR style): only L3
# checkpoints; the job is killed after the third, two whole nodes are
# deleted, and the relaunch rebuilds both nodes' data and parity from the
# other two and ends bit-identical.
printf '[basic]\nnode_size = 1\ngroup_size = 4\nl3_parity = 2\n[advanced]\nlocal_test = 1\n' > "$work/rotated.fti"
mpirun.openmpi -np 4 -x GOMAXPROCS=1 "$work/heat2d-mpi" "${args[@]}" -dir "$work/rot" -config "$work/rotated.fti" \
  -ckpt-every 250 -levels 3 -io-latency 2ms > "$work/rot1.log" 2>&1 &
mpipid=$!
kill_when "EVENT ckpt-end id=3 level=3" "$work/rot1.log" "$mpipid"
test ! -e "$work/rot/final.f64"
ls "$work/rot/local/node0001"/*/ckpt*/parity* > /dev/null  # every member holds parity (in its run directory)
rm -rf "$work/rot/local/node0001" "$work/rot/local/node0003"
echo "rotated parity: killed after checkpoint 3, deleted nodes 1 and 3"
mpirun.openmpi -np 4 -x GOMAXPROCS=1 "$work/heat2d-mpi" "${args[@]}" -dir "$work/rot" -config "$work/rotated.fti" \
  -ckpt-every 250 -levels 3 > "$work/rot2.log" 2>&1 || { cat "$work/rot2.log"; exit 1; }
grep EVENT "$work/rot2.log" | head -3
grep -q "EVENT start status=restart id=.* level=3" "$work/rot2.log" \
  || { echo "rotated launch 2 did not restart from L3"; exit 1; }
grep -q "EVENT done iter=2000" "$work/rot2.log"
cmp "$work/ref/final.f64" "$work/rot/final.f64"
echo "heat2d under MPI, rotated L3 parity: two of four nodes lost and rebuilt; final field bit-identical"

# Relaunch on another number of ranks: 4 MPI ranks are killed during the L4
# checkpoint that follows the L3 one (slow global storage keeps the kill
# inside it, so the L3 checkpoint is the newest committed), node 2 is deleted, and mpirun relaunches the job on 3 ranks
# (3 nodes): the field, one global dataset, is redistributed from the 4
# ranks' checkpoint (node 2's files rebuilt from the L3 parity first) and
# the run ends bit-identical to the 4-rank reference.
mpirun.openmpi -np 4 -x GOMAXPROCS=1 "$work/heat2d-mpi" "${args[@]}" -dir "$work/vpr" \
  -ckpt-every 250 -levels 1,2,3,4 -global-latency 50ms > "$work/vpr1.log" 2>&1 &
mpipid=$!
kill_when "EVENT ckpt-begin id=4 level=4" "$work/vpr1.log" "$mpipid"
if grep -q "EVENT ckpt-end id=4" "$work/vpr1.log"; then echo "the L4 checkpoint finished before the kill"; exit 1; fi
test ! -e "$work/vpr/final.f64"
rm -rf "$work/vpr/local/node0002"
echo "relaunch on 3 ranks: killed during checkpoint 4 (L4) after checkpoint 3 (L3), deleted node 2"
args3=(-role=job -ranks 3 -nodes 3 -nx 128 -ny 128 -iters 2000 -frame-every 100)
mpirun.openmpi -np 3 -x GOMAXPROCS=1 "$work/heat2d-mpi" "${args3[@]}" -dir "$work/vpr" \
  -ckpt-every 250 -levels 1,2,3,4 > "$work/vpr2.log" 2>&1 || { cat "$work/vpr2.log"; exit 1; }
grep EVENT "$work/vpr2.log" | head -2
grep -q "EVENT start status=restart id=3 level=3 iter=750 oldranks=4 ranks=3" "$work/vpr2.log" \
  || { echo "the 3-rank relaunch did not restart from the 4 ranks' L3 checkpoint"; exit 1; }
grep -q "EVENT done iter=2000" "$work/vpr2.log"
cmp "$work/ref/final.f64" "$work/vpr/final.f64"
echo "heat2d under MPI, relaunched on 3 ranks: the 4 ranks' field redistributed; final field bit-identical"

# Background post-processing (-async: inline_l2/l3/l4 = 0): each checkpoint
# commits at L1, its partner copy, parity or L4 container is made by a
# goroutine of every rank over a private communicator while the solver runs.
# Killed inside checkpoint 4 (L4), node 2 deleted: the relaunch restarts
# from checkpoint 3 at L3 if its post-processing finished before the kill,
# else from checkpoint 2 at L2 (checkpoint 3 then existed at L1 only and
# was lost with node 2), and ends bit-identical.
mpirun.openmpi -np 4 -x GOMAXPROCS=1 "$work/heat2d-mpi" "${args[@]}" -dir "$work/async" -async \
  -ckpt-every 250 -levels 1,2,3,4 -global-latency 50ms > "$work/async1.log" 2>&1 &
mpipid=$!
kill_when "EVENT ckpt-begin id=4 level=4" "$work/async1.log" "$mpipid"
test ! -e "$work/async/final.f64"
rm -rf "$work/async/local/node0002"
echo "async: killed during checkpoint 4 (L4), deleted node 2"
mpirun.openmpi -np 4 -x GOMAXPROCS=1 "$work/heat2d-mpi" "${args[@]}" -dir "$work/async" -async \
  -ckpt-every 250 -levels 1,2,3,4 > "$work/async2.log" 2>&1 || { cat "$work/async2.log"; exit 1; }
grep EVENT "$work/async2.log" | head -2
grep -Eq "EVENT start status=restart id=(3 level=3 iter=750|2 level=2 iter=500) " "$work/async2.log" \
  || { echo "the async relaunch did not restart from checkpoint 3 (L3) or 2 (L2)"; exit 1; }
grep -q "EVENT done iter=2000" "$work/async2.log"
cmp "$work/ref/final.f64" "$work/async/final.f64"
echo "heat2d under MPI with background post-processing: restarted after a kill and a lost node; final field bit-identical"

# Heads (-heads: head = 1, inline_l2/l3/l4 = 0): 8 MPI processes on 4
# simulated nodes, each node a head (its first rank) and one application
# rank; the solver runs on the 4 application ranks (the communicator
# without the heads) and the heads raise each checkpoint from L1 to L2, L3
# or L4. Killed once checkpoint 3 was post-processed to L3 by the heads,
# node 2 deleted: the relaunch, with heads, restarts from checkpoint 3 (L3,
# node 2 rebuilt from the parity) or from checkpoint 4 (L4) if the heads
# finished it before the kill landed, every head returns from Init with
# ckpt.ErrHead ("EVENT head done"), and the field is bit-identical.
hargs=(-role=job -heads -ranks 8 -nodes 4 -nx 128 -ny 128 -iters 2000 -frame-every 100)
mkdir -p "$work/heads" && : > "$work/heads/job.log"  # kill_when follows the job log
mpirun.openmpi -np 8 -x GOMAXPROCS=1 "$work/heat2d-mpi" "${hargs[@]}" -dir "$work/heads" \
  -ckpt-every 250 -levels 1,2,3,4 -global-latency 20ms > "$work/heads1.log" 2>&1 &
mpipid=$!
kill_when "Ckpt. ID 3 (L1 -> L3) post-processed by the heads" "$work/heads/job.log" "$mpipid"
grep EVENT "$work/heads1.log"
test ! -e "$work/heads/final.f64"
rm -rf "$work/heads/local/node0002"
echo "heads: killed after the heads post-processed checkpoint 3 to L3, deleted node 2"
mpirun.openmpi -np 8 -x GOMAXPROCS=1 "$work/heat2d-mpi" "${hargs[@]}" -dir "$work/heads" \
  -ckpt-every 250 -levels 1,2,3,4 > "$work/heads2.log" 2>&1 || { cat "$work/heads2.log"; exit 1; }
grep EVENT "$work/heads2.log" | head -2
grep -Eq "EVENT start status=restart id=(3 level=3 iter=750|4 level=4 iter=1000) oldranks=4 ranks=4 " "$work/heads2.log" \
  || { echo "the relaunch with heads did not restart from checkpoint 3 (L3) or 4 (L4)"; exit 1; }
grep -q "EVENT done iter=2000" "$work/heads2.log"
test "$(grep -c "EVENT head done" "$work/heads2.log")" -eq 4 \
  || { echo "want 4 heads to end with ErrHead"; cat "$work/heads2.log"; exit 1; }
grep -q "post-processed by the heads" "$work/heads/job.log"
cmp "$work/ref/final.f64" "$work/heads/final.f64"
echo "heat2d under MPI with heads: restarted after a kill and a lost node; final field bit-identical"

# Heads under MPICH (mpirun.mpich, build tag "mpi mpich"): the same kill,
# lost node and relaunch with heads, smaller to keep the script short
# (MPICH's ranks poll while they wait, so 8 processes on the CI's cores
# would take half a minute): 4 processes on 2 simulated nodes, a head and
# an application rank each, 1000 iterations, a checkpoint every 200.
# Killed once checkpoint 3 was post-processed to L3 by the heads, node 1
# deleted: the relaunch restarts from checkpoint 3 (L3, node 1 rebuilt
# from the parity) or 4 (L4), every head ends with ckpt.ErrHead, and the
# field is bit-identical to the reference of 1000 iterations.
go build -tags 'mpi mpich' -o "$work/heat2d-mpich" ./examples/heat2d
"$work/heat2d" -role=job -ranks 4 -nodes 4 -nx 128 -ny 128 -iters 1000 -frame-every 100 -dir "$work/ref1000" -ckpt-every 0 -levels 1 > /dev/null
margs=(-role=job -heads -ranks 4 -nodes 2 -nx 128 -ny 128 -iters 1000 -frame-every 100)
mkdir -p "$work/mheads" && : > "$work/mheads/job.log"
mpirun.mpich -np 4 -genv GOMAXPROCS 1 "$work/heat2d-mpich" "${margs[@]}" -dir "$work/mheads" \
  -ckpt-every 200 -levels 1,2,3,4 -global-latency 20ms > "$work/mheads1.log" 2>&1 &
mpipid=$!
kill_when "Ckpt. ID 3 (L1 -> L3) post-processed by the heads" "$work/mheads/job.log" "$mpipid"
grep EVENT "$work/mheads1.log"
test ! -e "$work/mheads/final.f64"
rm -rf "$work/mheads/local/node0001"
echo "heads under MPICH: killed after the heads post-processed checkpoint 3 to L3, deleted node 1"
mpirun.mpich -np 4 -genv GOMAXPROCS 1 "$work/heat2d-mpich" "${margs[@]}" -dir "$work/mheads" \
  -ckpt-every 200 -levels 1,2,3,4 > "$work/mheads2.log" 2>&1 || { cat "$work/mheads2.log"; exit 1; }
grep EVENT "$work/mheads2.log" | head -2
grep -Eq "EVENT start status=restart id=(3 level=3 iter=600|4 level=4 iter=800) oldranks=2 ranks=2 " "$work/mheads2.log" \
  || { echo "the relaunch with heads under MPICH did not restart from checkpoint 3 (L3) or 4 (L4)"; exit 1; }
grep -q "EVENT done iter=1000" "$work/mheads2.log"
test "$(grep -c "EVENT head done" "$work/mheads2.log")" -eq 2 \
  || { echo "want 2 heads to end with ErrHead"; cat "$work/mheads2.log"; exit 1; }
grep -q "post-processed by the heads" "$work/mheads/job.log"
cmp "$work/ref1000/final.f64" "$work/mheads/final.f64"
echo "heat2d under MPICH with heads: restarted after a kill and a lost node; final field bit-identical"
