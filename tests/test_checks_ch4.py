"""Chapter 4 exercise checks: right answers pass, each usual mistake fails with a message that names it."""

from __future__ import annotations

import pytest

from gpucourse.checks import CheckFailed, ch4
from gpucourse.multigpu import model as M
from gpucourse.multigpu.mpi import exchange, ranks

# --- 4.1 -----------------------------------------------------------------------------------------


def local_ranks_from_one(hosts, gpus):
    seen = {}
    devices = []
    for host in hosts:
        seen[host] = seen.get(host, 0) + 1
        devices.append(seen[host] % gpus)
    return devices


def sorted_hosts(hosts, gpus):
    order = sorted(range(len(hosts)), key=lambda i: hosts[i])
    devices = ranks.assign_devices(hosts, gpus)
    return [devices[i] for i in order]


def test_assign_devices():
    ch4.check_assign_devices(ranks.assign_devices)
    with pytest.raises(CheckFailed, match="world rank modulo"):
        ch4.check_assign_devices(lambda hosts, gpus: [r % gpus for r in range(len(hosts))])
    with pytest.raises(CheckFailed, match=r"wrap the node-local rank with % gpus_per_host"):
        ch4.check_assign_devices(lambda hosts, gpus: ranks.node_local_ranks(hosts))
    with pytest.raises(CheckFailed, match="count from 0"):
        ch4.check_assign_devices(local_ranks_from_one)
    with pytest.raises(CheckFailed, match="sorted host names"):
        ch4.check_assign_devices(sorted_hosts)
    with pytest.raises(CheckFailed, match="one per rank"):
        ch4.check_assign_devices(lambda hosts, gpus: ranks.assign_devices(sorted(set(hosts)), gpus))
    with pytest.raises(CheckFailed, match="raised ZeroDivisionError"):
        ch4.check_assign_devices(lambda hosts, gpus: 1 // 0)


# --- 4.2 -----------------------------------------------------------------------------------------


def reference_time_ms(problem, gpus, machine):
    """The notebook's reference answer."""
    memory_ms = 2 * problem.data_bytes / gpus / (machine.hbm_gbs * 1e9) * 1e3
    compute_ms = problem.flops / gpus / (machine.tflops * 1e12) * 1e3
    if gpus == 1 or problem.exchange == "none":
        sent, messages = 0.0, 0
    elif problem.exchange == "halo":
        messages = min(gpus - 1, 2)
        sent = messages * problem.halo_bytes
    else:
        messages = gpus - 1
        sent = problem.data_bytes / gpus * (gpus - 1) / gpus
    link_ms = sent / (machine.link_gbs * 1e9) * 1e3
    step_ms = ((problem.launches + messages) * machine.launch_us + messages * machine.latency_us) / 1e3
    return max(memory_ms, compute_ms) + link_ms + step_ms


def reference_pays(problem, gpus, machine):
    return reference_time_ms(problem, gpus, machine) < reference_time_ms(problem, 1, machine)


def seconds_then_ms(problem, gpus, machine):
    """Right, written another way: seconds throughout, a table of what each exchange sends, converted at the end."""
    share = problem.data_bytes / gpus
    outgoing = {"none": (0, 0), "halo": (problem.halo_bytes * (1 if gpus == 2 else 2), 1 if gpus == 2 else 2),
                "all_to_all": (share - share / gpus, gpus - 1)}
    sent, messages = outgoing[problem.exchange] if gpus > 1 else (0, 0)
    seconds = max(2 * share / (machine.hbm_gbs * 10**9), problem.flops / (gpus * machine.tflops * 10**12))
    seconds += sent / (machine.link_gbs * 10**9)
    seconds += (problem.launches * machine.launch_us + messages * (machine.launch_us + machine.latency_us)) * 1e-6
    return 1000 * seconds


def blocks_per_gpu(problem, gpus, machine):
    """Right, written a third way: in blocks of a share, bytes over GB/s give µs... then ms."""
    block = problem.data_bytes / gpus**2
    neighbours = 0 if gpus == 1 else (1 if gpus == 2 else 2)
    if problem.exchange == "all_to_all":
        sent, messages = block * (gpus - 1), gpus - 1
    elif problem.exchange == "halo":
        sent, messages = problem.halo_bytes * neighbours, neighbours
    else:
        sent, messages = 0, 0
    us = max(2 * block * gpus / (machine.hbm_gbs * 1e3), problem.flops / gpus / (machine.tflops * 1e6))
    us += sent / (machine.link_gbs * 1e3) + problem.launches * machine.launch_us
    for _ in range(messages):
        us += machine.launch_us + machine.latency_us
    return us / 1000


def faster_per_gpu(problem, gpus, machine):
    """Wrong: pays only if P GPUs are P times as fast."""
    return seconds_then_ms(problem, gpus, machine) * gpus < seconds_then_ms(problem, 1, machine)


def by_hand(hbm="hbm", passes=2, divided=True, sent_factor=1.0, link_factor=1.0, all_to_all="p-1", neighbours="middle",
            launch=True, latency=True, messages_launch=True, processes="one per GPU", combine="max", compute=True, unit="ms"):
    """An answer written from the exercise's text with one knob turned the wrong way (independent of the check's catalogue).

    GB = 1e9 bytes and TFLOP/s = 1e12 flop/s; times are summed in seconds and converted once at the end.
    """
    def predicted(problem, gpus, machine):
        share = problem.data_bytes / (gpus if divided else 1)
        rate = machine.hbm_gbs if hbm == "hbm" else machine.link_gbs
        memory_s = passes * share / (rate * 1e9)
        compute_s = problem.flops / (gpus if divided else 1) / (machine.tflops * 1e12) if compute else 0.0
        if gpus == 1 or problem.exchange == "none":
            sent, messages = 0.0, 0
        elif problem.exchange == "all_to_all":
            if all_to_all == "p-1":
                sent, messages = problem.data_bytes / gpus * (gpus - 1) / gpus, gpus - 1
            else:  # a GPU sends its whole share, one message to each of the P GPUs
                sent, messages = problem.data_bytes / gpus, gpus
        else:
            count = {"middle": min(2, gpus - 1), "all": gpus - 1, "two": 2}[neighbours]
            sent, messages = count * problem.halo_bytes, count
        link_s = sent_factor * sent / (link_factor * machine.link_gbs * 1e9)
        issued = (problem.launches + (messages if messages_launch else 0)) * (machine.launch_us if launch else 0.0)
        if processes == "one for all":
            issued *= gpus
        steps_s = (issued + messages * (machine.latency_us if latency else 0.0)) * 1e-6
        body = max(memory_s, compute_s) if combine == "max" else memory_s + compute_s
        seconds = body + link_s + steps_s
        return {"ms": 1e3, "s": 1.0, "us": 1e6}[unit] * seconds
    return predicted


def test_the_split_estimate_passes_right_answers(capsys):
    for answer in (reference_time_ms, seconds_then_ms, blocks_per_gpu, M.split_estimate_ms):
        ch4.check_split_estimate(answer, reference_pays)
        assert capsys.readouterr().out.startswith(f"\u2705 Exercise 4.2: your estimate matches the model on {len(ch4.SPLIT_CASES)} cases")
    ch4.check_split_estimate(seconds_then_ms, lambda problem, gpus, machine: not seconds_then_ms(problem, gpus, machine)
                             >= seconds_then_ms(problem, 1, machine))


def read_only_by_hand(problem, gpus, machine):
    """Wrong: counts the data once in HBM (written by hand, not from the catalogue)."""
    return reference_time_ms(problem, gpus, machine) - (
        max(2 * problem.data_bytes / gpus / (machine.hbm_gbs * 1e9), problem.flops / gpus / (machine.tflops * 1e12))
        - max(problem.data_bytes / gpus / (machine.hbm_gbs * 1e9), problem.flops / gpus / (machine.tflops * 1e12))) * 1e3


def no_steps_by_hand(problem, gpus, machine):
    """Wrong: the launches and the latency left out."""
    _, messages = M.exchanged(problem, gpus)
    return reference_time_ms(problem, gpus, machine) - (
        (problem.launches + messages) * machine.launch_us + messages * machine.latency_us) / 1e3


def p_peers_by_hand(problem, gpus, machine):
    """Wrong: the all-to-all sends the whole share, to P peers."""
    if problem.exchange != "all_to_all" or gpus == 1:
        return reference_time_ms(problem, gpus, machine)
    memory = 2 * problem.data_bytes / gpus / (machine.hbm_gbs * 1e9) * 1e3
    link = problem.data_bytes / gpus / (machine.link_gbs * 1e9) * 1e3
    return memory + link + ((problem.launches + gpus) * machine.launch_us + gpus * machine.latency_us) / 1e3


@pytest.mark.parametrize(("answer", "cause"), [
    (by_hand(hbm="link"), "The memory time uses the link's bandwidth"),
    (read_only_by_hand, "The memory time counts the data once"),
    (by_hand(passes=1), "The memory time counts the data once"),
    (by_hand(sent_factor=2), "The link time puts the bytes a GPU sends and those it receives on one direction"),
    (by_hand(link_factor=2), "The link time uses both directions' bandwidth"),
    (no_steps_by_hand, "The per-step costs are left out"),
    (by_hand(launch=False), "The host's cost per step"),
    (by_hand(latency=False), "The link's latency"),
    (by_hand(messages_launch=False), "Only the launches pay machine.launch_us"),
    (p_peers_by_hand, "In the all-to-all a GPU sends to P - 1 others, not P"),
    (by_hand(neighbours="all"), "A halo goes to the neighbouring slabs only"),
    (by_hand(neighbours="two"), "With 2 GPUs each slab has one neighbour"),
    (by_hand(divided=False), "The memory and compute times are not divided by the GPUs"),
    (by_hand(processes="one for all"), "The steps are counted for all P GPUs"),
    (by_hand(combine="sum"), "Memory and compute times are added"),
    (by_hand(compute=False), "The flops are left out"),
    (by_hand(unit="s"), "Your times are 1000 times too small"),
    (by_hand(unit="us"), "Your times are 1000 times too large"),
])
def test_the_split_estimate_names_each_usual_mistake(answer, cause):
    with pytest.raises(CheckFailed) as failed:
        ch4.check_split_estimate(answer, reference_pays)
    message = str(failed.value)
    assert message.startswith(f"Exercise 4.2: not yet right.\n  - {cause}"), message
    assert "For " in message and "yours" in message and len(message.splitlines()) <= 5 and len(message) < 600


def test_the_split_estimate_explains_an_unknown_mistake_and_wrong_verdicts():
    two_mistakes = lambda problem, gpus, machine: by_hand(passes=1)(problem, gpus, machine) * 1.5  # noqa: E731
    with pytest.raises(CheckFailed, match=r"For the transpose of 16384² float32 on 1 GPU .*The model's parts: memory .* compute"):
        ch4.check_split_estimate(two_mistakes, reference_pays)
    with pytest.raises(CheckFailed, match=r"split_pays\('the transpose of 16384² float32', 4, .*says False, but 4 GPUs take "
                                          r"0\.692\d? ms and one GPU 0\.7308 ms: splitting pays when the split run is faster at all"):
        ch4.check_split_estimate(reference_time_ms, faster_per_gpu)
    with pytest.raises(CheckFailed, match="returned 'fast'; return True or False"):
        ch4.check_split_estimate(reference_time_ms, lambda problem, gpus, machine: "fast")
    with pytest.raises(CheckFailed, match="returned None; return the time in ms, a number"):
        ch4.check_split_estimate(lambda problem, gpus, machine: None, reference_pays)
    with pytest.raises(CheckFailed, match="raised AttributeError"):
        ch4.check_split_estimate(lambda problem, gpus, machine: problem.bytes, reference_pays)


def test_every_usual_mistake_is_told_apart_from_the_others():
    values = {m: [ch4._mistaken_ms(m, *case) for case in ch4.SPLIT_CASES] for m in ch4.SPLIT_MISTAKES}
    reference = [M.split_estimate_ms(*case) for case in ch4.SPLIT_CASES]
    for mistake, got in values.items():
        differs = [abs(g - w) > 10 * ch4._TOLERANCE * w for g, w in zip(got, reference)]
        assert any(differs), mistake
        for other, theirs in values.items():
            if other != mistake:
                assert any(abs(g - t) > 10 * ch4._TOLERANCE * t for g, t in zip(got, theirs)), (mistake, other)
    verdicts = [M.splitting_pays(*case) for case in ch4.SPLIT_CASES if case[1] > 1]
    assert any(verdicts) and not all(verdicts)  # some cases pay and some do not
    kinds = {(case[0].exchange, M.splitting_pays(*case)) for case in ch4.SPLIT_CASES if case[1] > 1}
    assert {("all_to_all", True), ("all_to_all", False), ("halo", True), ("halo", False), ("none", True)} <= kinds


# --- 4.3 -----------------------------------------------------------------------------------------


def ungrouped(comm, send, recv):
    for peer in range(comm.size):
        comm.send(send[peer], peer)
        comm.recv(recv[peer], peer)


def own_block(comm, send, recv):
    with comm.group():
        for peer in range(comm.size):
            comm.send(send[comm.rank], peer)
            comm.recv(recv[peer], peer)


def skip_self(comm, send, recv):
    with comm.group():
        for peer in range(comm.size):
            if peer != comm.rank:
                comm.send(send[peer], peer)
                comm.recv(recv[peer], peer)


def copy_self(comm, send, recv):
    recv[comm.rank][...] = send[comm.rank]
    skip_self(comm, send, recv)


def shifted(comm, send, recv):
    with comm.group():
        for peer in range(comm.size):
            comm.send(send[peer], peer)
            comm.recv(recv[(peer + 1) % comm.size], peer)


def pairwise_in_order(comm, send, recv):
    """No group: each pair of ranks exchanges in turn, the lower rank sending first, so that no send waits for ever."""
    recv[comm.rank][...] = send[comm.rank]
    for peer in range(comm.size):
        if peer < comm.rank:
            comm.recv(recv[peer], peer)
            comm.send(send[peer], peer)
        elif peer > comm.rank:
            comm.send(send[peer], peer)
            comm.recv(recv[peer], peer)


def group_per_peer(comm, send, recv):
    for peer in range(comm.size):
        with comm.group():
            comm.send(send[peer], peer)
            comm.recv(recv[peer], peer)


def test_the_all_to_all_pass_line_says_grouped_only_for_one_group(capsys):
    for grouped in (exchange.all_to_all, copy_self):
        ch4.check_all_to_all(grouped)
        assert "in one grouped exchange that cannot deadlock" in capsys.readouterr().out
    for ungrouped_but_right in (pairwise_in_order, group_per_peer):
        ch4.check_all_to_all(ungrouped_but_right)
        line = capsys.readouterr().out
        assert line.startswith("\u2705 Exercise 4.3: with 1 to 5 ranks every block reaches its rank.")
        assert "grouped exchange" not in line and "several steps" in line and "with comm.group()" in line


def test_all_to_all():
    ch4.check_all_to_all(exchange.all_to_all)
    ch4.check_all_to_all(copy_self)
    with pytest.raises(CheckFailed, match=r"deadlock: rank 1 waits in its send to rank 0 .*; rank 0 waits in its send to itself.*"
                                          "with comm.group"):
        ch4.check_all_to_all(ungrouped)  # the example names the wait on another rank first, and a self-send as such
    with pytest.raises(CheckFailed, match=r"sent its block send\[1\]"):
        ch4.check_all_to_all(own_block)
    with pytest.raises(CheckFailed, match="block for itself"):
        ch4.check_all_to_all(skip_self)
    with pytest.raises(CheckFailed, match="holds the block of rank"):
        ch4.check_all_to_all(shifted)
    with pytest.raises(CheckFailed, match="raised KeyError"):
        ch4.check_all_to_all(lambda comm, send, recv: {}["x"])
