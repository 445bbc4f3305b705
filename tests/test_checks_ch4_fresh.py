"""Chapter 4 checks on answers written fresh, of kinds the first tests did not have: each wrong one is named, each right one passes.

The wrong answers are written from the exercises' text with one slip each, never from the check's catalogue of
mistakes; 4.2's expected values are derived here from bytes, bandwidths and costs per step, by hand.
"""

from __future__ import annotations

import collections
import math
from fractions import Fraction

import numpy as np
import pytest
from answers_common import caught

from gpucourse.checks import ch4
from gpucourse.multigpu import model as M

# --- 4.1 -----------------------------------------------------------------------------------------


def emptying(hostnames, gpus_per_host):
    """Wrong: right devices, but it pops the caller's list empty."""
    seen, devices = {}, []
    while hostnames:
        host = hostnames.pop(0)
        devices.append(seen.get(host, 0) % gpus_per_host)
        seen[host] = seen.get(host, 0) + 1
    return devices


def sorting_in_place(hostnames, gpus_per_host):
    """Wrong: sorts the caller's list to group the hosts, and returns devices in the sorted order."""
    hostnames.sort()
    return [(i - hostnames.index(h)) % gpus_per_host for i, h in enumerate(hostnames)]


def clamped(hostnames, gpus_per_host):
    """Wrong: ranks beyond a host's GPUs all take its last GPU."""
    counts = collections.Counter()
    devices = []
    for host in hostnames:
        devices.append(min(counts[host], gpus_per_host - 1))
        counts[host] += 1
    return devices


def bitmask(hostnames, gpus_per_host):
    """Wrong: wraps with a bit mask, right only for 1, 2, 4 and 8 GPUs."""
    counts = collections.Counter()
    devices = []
    for host in hostnames:
        devices.append(counts[host] & (gpus_per_host - 1))
        counts[host] += 1
    return devices


def subtract_once(hostnames, gpus_per_host):
    """Wrong: wraps by subtracting the GPUs once."""
    counts = collections.Counter()
    devices = []
    for host in hostnames:
        local = counts[host]
        devices.append(local if local < gpus_per_host else local - gpus_per_host)
        counts[host] += 1
    return devices


def by_prefix_count(hostnames, gpus_per_host):
    """Right, another way: a rank's node-local rank is how often its host appears before it."""
    return [hostnames[:rank].count(host) % gpus_per_host for rank, host in enumerate(hostnames)]


def by_groups(hostnames, gpus_per_host):
    """Right, another way: group the ranks of each host with NumPy, number them within the group."""
    names = np.array(hostnames, dtype=object)
    devices = np.zeros(len(hostnames), dtype=int)
    for host in dict.fromkeys(hostnames):
        members = np.flatnonzero(names == host)
        devices[members] = np.arange(members.size) % gpus_per_host
    return devices.tolist()


@pytest.mark.parametrize(("answer", "words"), [
    (emptying, ["changed the list it was given", "never pop"]),
    (sorting_in_place, ["changed the list it was given", "sort"]),
    (clamped, ["last GPU", "% gpus_per_host"]),
    (bitmask, ["power of two", "% gpus_per_host"]),
    (subtract_once, ["gives device 2, but each host has GPUs 0 to 1", "% gpus_per_host"]),
])
def test_fresh_wrong_device_assignments_are_named(answer, words):
    message = caught(ch4.check_assign_devices, answer)
    assert all(word in message for word in words), message


@pytest.mark.parametrize("answer", [by_prefix_count, by_groups])
def test_fresh_right_device_assignments_pass(answer, capsys):
    ch4.check_assign_devices(answer)
    assert capsys.readouterr().out.startswith("\u2705 Exercise 4.1")


# --- 4.2 -----------------------------------------------------------------------------------------

GB = 10**9  # bytes; bandwidths are in GB/s


def first_principles_ms(problem, gpus, machine) -> float:
    """The estimate from the exercise's words, with exact fractions: bytes over bytes per second, µs to ms."""
    share = Fraction(problem.data_bytes) / gpus
    memory_s = 2 * share / (Fraction(machine.hbm_gbs) * GB)
    compute_s = Fraction(problem.flops) / gpus / (Fraction(machine.tflops) * 10**12)
    if gpus == 1 or problem.exchange == "none":
        sent, messages = Fraction(0), 0
    elif problem.exchange == "halo":
        messages = 1 if gpus == 2 else 2
        sent = messages * Fraction(problem.halo_bytes)
    else:
        messages = gpus - 1
        sent = share / gpus * (gpus - 1)
    link_s = sent / (Fraction(machine.link_gbs) * GB)
    steps_us = (problem.launches + messages) * Fraction(machine.launch_us) + messages * Fraction(machine.latency_us)
    return float((max(memory_s, compute_s) + link_s) * 1000 + steps_us / 1000)


def test_the_model_matches_hand_worked_values():
    """Two cases worked on paper: the numbers the exercise's text gives, not the model's code."""
    transpose = M.Problem("t", 16384 * 16384 * 4, exchange="all_to_all")
    # 4 GPUs: memory 2 * 2**30 / 4 B / 3000 GB/s = 178.957 µs; link 2**30 / 4 * 3/4 B / 450 GB/s = 447.392 µs;
    # steps (1 launch + 3 messages) * 15 µs + 3 * 2 µs = 66 µs: 692.349 µs in all
    assert M.split_estimate_ms(transpose, 4, M.H100_NVSWITCH) == pytest.approx(0.692349, abs=2e-6)
    stencil = M.Problem("s", 16384 * 16384 * 4, flops=5.0 * 16384 * 16384, exchange="halo", halo_bytes=16384 * 4, launches=3)
    # 7 GPUs over PCIe: memory 2 * 2**30 / 7 B / 3000 GB/s = 102.261 µs (compute 5 * 2**28 / 7 / 67e12 s = 2.862 µs is smaller);
    # link 2 * 65536 B / 50 GB/s = 2.621 µs; steps (3 + 2) * 15 µs + 2 * 5 µs = 85 µs: 189.882 µs in all
    assert M.split_estimate_ms(stencil, 7, M.H100_PCIE) == pytest.approx(0.189882, abs=2e-6)
    for case in ch4.SPLIT_CASES:
        assert M.split_estimate_ms(*case) == pytest.approx(first_principles_ms(*case), rel=1e-12)


def pays_by_hand(problem, gpus, machine):
    return first_principles_ms(problem, gpus, machine) < first_principles_ms(problem, 1, machine)


def estimate(gb=1e9, link_bits=False, extra_halos=0, all_to_all_rounds=None):
    """An answer from the exercise's words, with one slip: a GB of `gb` bytes, bits on the link, halos too many, rounds."""
    def predicted(problem, gpus, machine):
        memory = 2 * problem.data_bytes / gpus / (machine.hbm_gbs * gb)
        compute = problem.flops / gpus / (machine.tflops * 1e12)
        if gpus == 1 or problem.exchange == "none":
            sent, messages = 0.0, 0
        elif problem.exchange == "halo":
            messages = min(2, gpus - 1) + extra_halos
            sent = messages * problem.halo_bytes
        elif all_to_all_rounds:  # recursive halving: log2(P) rounds, each sending half of what is left
            messages = math.ceil(math.log2(gpus))
            sent = problem.data_bytes / gpus / 2 * messages
        else:
            messages = gpus - 1
            sent = problem.data_bytes / gpus * (gpus - 1) / gpus
        link = sent * (8 if link_bits else 1) / (machine.link_gbs * gb)
        steps = ((problem.launches + messages) * machine.launch_us + messages * machine.latency_us) / 1e6
        return (max(memory, compute) + link + steps) * 1e3
    return predicted


@pytest.mark.parametrize(("answer", "words"), [
    (estimate(gb=2**30), ["GiB", "2**30", "1e9"]),
    (estimate(link_bits=True), ["link time is 8 times", "bits"]),
    (estimate(extra_halos=1), ["one halo too many"]),
    (estimate(all_to_all_rounds=True), ["The model's parts", "3 messages"]),
])
def test_fresh_wrong_estimates_are_named(answer, words):
    message = caught(ch4.check_split_estimate, answer, pays_by_hand)
    assert all(word in message for word in words), message


def only_powers_of_two_pay(problem, gpus, machine):
    """Wrong: a verdict that compares as if P were a power of two (it halves the GPUs down to one)."""
    return first_principles_ms(problem, 2 ** int(math.log2(gpus)), machine) < first_principles_ms(problem, 1, machine)


def test_a_verdict_right_only_for_powers_of_two_is_caught():
    message = caught(ch4.check_split_estimate, first_principles_ms, only_powers_of_two_pay)
    assert "splitting pays when the split run is faster" in message, message


def in_microseconds_then_ms(problem, gpus, machine):
    """Right, another way: every part in µs (bytes / (GB/s * 1e3) is µs), a table of the exchanges, then / 1000."""
    neighbours = {True: 0, False: 1 if gpus == 2 else 2}[gpus == 1]
    table = {"none": (0.0, 0), "halo": (neighbours * problem.halo_bytes, neighbours),
             "all_to_all": (problem.data_bytes * (gpus - 1) / gpus**2, gpus - 1)}
    sent, messages = table[problem.exchange]
    body = max(2 * problem.data_bytes / gpus / (machine.hbm_gbs * 1e3), problem.flops / gpus / (machine.tflops * 1e6))
    return (body + sent / (machine.link_gbs * 1e3) + problem.launches * machine.launch_us
            + messages * (machine.launch_us + machine.latency_us)) / 1000


@pytest.mark.parametrize("answer", [first_principles_ms, in_microseconds_then_ms])
def test_fresh_right_estimates_pass(answer, capsys):
    ch4.check_split_estimate(answer, lambda problem, gpus, machine: answer(problem, gpus, machine) < answer(problem, 1, machine))
    assert capsys.readouterr().out.startswith("\u2705 Exercise 4.2")


# --- 4.3 -----------------------------------------------------------------------------------------


def ring(comm, send, recv):
    """Right, another way: in one group, at shift s send to rank + s and receive from rank - s."""
    with comm.group():
        for shift in range(comm.size):
            comm.send(send[(comm.rank + shift) % comm.size], (comm.rank + shift) % comm.size)
            comm.recv(recv[(comm.rank - shift) % comm.size], (comm.rank - shift) % comm.size)


def others_reversed_then_self(comm, send, recv):
    """Right, another way: its own block copied, the others in one group in reverse order."""
    with comm.group():
        for peer in reversed(range(comm.size)):
            if peer != comm.rank:
                comm.recv(recv[peer], peer)
                comm.send(send[peer], peer)
    recv[comm.rank][...] = send[comm.rank]


def scribbles_on_send(comm, send, recv):
    """Wrong: uses send as scratch once its blocks are issued."""
    with comm.group():
        for peer in range(comm.size):
            comm.send(send[peer], peer)
            comm.recv(recv[peer], peer)
    send[...] = 0


def all_into_own_slot(comm, send, recv):
    """Wrong: every block lands in recv[comm.rank]."""
    with comm.group():
        for peer in range(comm.size):
            comm.send(send[peer], peer)
            comm.recv(recv[comm.rank], peer)


def sends_grouped_receives_after(comm, send, recv):
    """Wrong: the sends are grouped, the receives come after the group."""
    with comm.group():
        for peer in range(comm.size):
            comm.send(send[peer], peer)
    for peer in range(comm.size):
        comm.recv(recv[peer], peer)


def wrong_shift(comm, send, recv):
    """Wrong: sends to rank + s but receives from rank + s too (only right for 2 ranks)."""
    with comm.group():
        for shift in range(comm.size):
            peer = (comm.rank + shift) % comm.size
            comm.send(send[peer], peer)
            comm.recv(recv[(comm.rank + shift) % comm.size], (comm.rank - shift) % comm.size)


@pytest.mark.parametrize(("answer", "words"), [
    (scribbles_on_send, ["changed rank", "'s send in place", "must be left as it was"]),
    (all_into_own_slot, ["holds the block of rank", "receive from rank p into recv[p]"]),
    (sends_grouped_receives_after, ["deadlock"]),
    (wrong_shift, ["with 3 ranks", "holds the block of rank"]),
])
def test_fresh_wrong_all_to_alls_are_named(answer, words):
    message = caught(ch4.check_all_to_all, answer)
    assert all(word in message for word in words), message


@pytest.mark.parametrize("answer", [ring, others_reversed_then_self])
def test_fresh_right_all_to_alls_pass(answer, capsys):
    ch4.check_all_to_all(answer)
    assert capsys.readouterr().out.startswith("\u2705 Exercise 4.3: with 1 to 5 ranks every block reaches its rank")


def test_the_fresh_answers_are_not_the_course_s_own():
    """The right answers here are written out, not calls of the course's implementation of the exercise."""
    for answer in (by_prefix_count, by_groups, first_principles_ms, in_microseconds_then_ms, ring, others_reversed_then_self):
        names = set(answer.__code__.co_names)
        assert not names & {"ranks", "assign_devices", "split_estimate_ms", "split_estimate", "all_to_all", "ch4", "M"}, answer
