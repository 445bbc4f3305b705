"""Chapter 4 exercise checks: right answers pass, each usual mistake fails with a message that names it."""

from __future__ import annotations

import pytest

from gpucourse import distributed as D
from gpucourse.checks import CheckFailed, ch4
from gpucourse.mpi import exchange, ranks

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


def test_transpose_schedule():
    ch4.check_transpose_schedule(D.transpose_schedule)
    ch4.check_transpose_schedule(lambda n: [[((r - k) % n, r) for r in range(n)] for k in range(n)])  # the other direction
    with pytest.raises(CheckFailed, match="diagonal blocks"):
        ch4.check_transpose_schedule(lambda n: D.transpose_schedule(n)[1:])
    with pytest.raises(CheckFailed, match="never move"):  # one stage short
        ch4.check_transpose_schedule(lambda n: D.transpose_schedule(n)[:-1] if n > 2 else D.transpose_schedule(n))
    with pytest.raises(CheckFailed, match="part 0 receives 2 blocks"):  # every part sends to part k in stage k: one link busy
        ch4.check_transpose_schedule(lambda n: [[(r, k) for r in range(n)] for k in range(n)])
    with pytest.raises(CheckFailed, match="4 stages: 2 parts need 2"):  # one pair per stage: valid pairs, too many stages
        ch4.check_transpose_schedule(lambda n: [[pair] for stage in D.transpose_schedule(n) for pair in stage])
    with pytest.raises(CheckFailed, match="comes twice"):
        ch4.check_transpose_schedule(lambda n: D.transpose_schedule(n) + D.transpose_schedule(n)[1:2])


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
        assert line.startswith("\u2705 Exercise 4.3: with 2, 3 and 4 ranks every block reaches its rank.")
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
