"""The embedded broker (console/broker.py) under load: two producer processes push 5,000 messages
through the project's Celery connection to two consumer processes; every message arrives exactly
once and no process dies.

kombu's filesystem transport, the embedded broker before this one, could hand a consumer a message
file its producer had created but not written yet: the consumer died on JSONDecodeError and the
message was lost (the Celery worker of `make run` died that way). On a quiet machine that window
is microseconds wide; a loaded machine widens it by descheduling the producer. So the producers
here pause for a millisecond while they encode each message, inside the transport's own write,
as a loaded machine would make them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import settings

MESSAGES = 5000
PREAMBLE = """
import sys, time
from kombu import Consumer, Exchange, Producer, Queue
from console.celery import app
queue = Queue("stress", Exchange("stress"), "stress")
connection = app.connection_for_write()
"""
PRODUCE = """
put = connection.transport.Channel._put
encode = put.__globals__["dumps"]
def slowly(*args, **kwargs):
    time.sleep(0.001)
    return encode(*args, **kwargs)
put.__globals__["dumps"] = slowly
producer = Producer(connection.default_channel)
for number in range(int(sys.argv[1]), int(sys.argv[2])):
    producer.publish({"number": number}, exchange=queue.exchange, routing_key="stress",
                     declare=[queue])
"""
CONSUME = """
received = open(sys.argv[1], "w")
stopped = []
def on_message(body, message):
    if body == "stop":
        stopped.append(True)
    else:
        received.write(f"{body['number']}\\n")
    message.ack()
with Consumer(connection.default_channel, [queue], callbacks=[on_message]):
    while not stopped:
        try:
            connection.drain_events(timeout=1)
        except TimeoutError:
            pass
received.close()
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The embedded default even where CI sets REDIS_URL, on a broker file of this test's own."""
    environ = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    return environ | {"TRAINYARD_VAR_DIR": str(tmp_path), "PYTHONPATH": str(settings.BASE_DIR)}


@pytest.fixture
def start(env: dict[str, str]) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Starts a producer or consumer script; whatever still runs at the end is stopped."""
    started: list[subprocess.Popen[str]] = []

    def run(script: str, *args: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, "-c", PREAMBLE + script, *args],
            env=env, cwd=settings.BASE_DIR, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        started.append(process)
        return process

    yield run
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate()


def test_it_delivers_every_message_once_from_two_producers_to_two_consumers(
    start: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    outputs = [tmp_path / "consumer-0.txt", tmp_path / "consumer-1.txt"]
    consumers = [start(CONSUME, str(output)) for output in outputs]
    halves = [(0, MESSAGES // 2), (MESSAGES // 2, MESSAGES)]
    producers = [start(PRODUCE, str(first), str(end)) for first, end in halves]
    for producer in producers:
        _, errors = producer.communicate(timeout=300)
        assert producer.returncode == 0, errors
    stop = start("Producer(connection.default_channel).publish('stop', exchange=queue.exchange, "
                 "routing_key='stress', declare=[queue])\n" * 2)  # fmt: skip
    assert stop.wait(timeout=60) == 0
    for consumer in consumers:
        _, errors = consumer.communicate(timeout=300)
        assert consumer.returncode == 0, errors
    counts = Counter(int(line) for output in outputs for line in output.read_text().split())
    assert sorted(counts) == list(range(MESSAGES)), f"{MESSAGES - len(counts)} messages lost"
    assert [number for number, times in counts.items() if times > 1] == []
    assert all(output.stat().st_size > 0 for output in outputs), "both consumers took messages"
