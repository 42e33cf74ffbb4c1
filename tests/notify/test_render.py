"""Messages in words (notify.render), issue 32 §Build 2: Job name and project, the event, the
workload state with its source and age, the reason, the GPUs and how long they are held, the
link; complete in English and in 简体中文 (an English message carries no Chinese, and the reverse
except names)."""

from __future__ import annotations

import re
from datetime import timedelta

from jobs.messages import Message, encode
from notify.render import render
from tests.notify.test_senders import FACTS, T0

STALLED = encode(Message("workload.stalled", {"step": 18200, "seconds": 2520, "limit": 600}))
# Names, status values (English in the Chinese spec), numbers and links: the rest is words.
KEPT = re.compile(
    r"ppo-7b|vision|gpu-a|Trainyard|Stalled|Running|GPU|Job|Addon|https?://\S+|[\d,./:-]+"
)


def test_it_says_everything_the_issue_lists_in_english() -> None:
    facts = FACTS | {"workload": FACTS["workload"] | {"reason": STALLED}}
    message = render(facts, "en", T0 + timedelta(minutes=3))
    text = "\n".join([message.title, *message.lines])
    assert message.title == "[Trainyard] Workload stalled: ppo-7b"
    for words in ("Job ppo-7b (project vision)", "Workload: Stalled (from signal, 3",
                  "Last step 18,200 of 50,000", "Step 18200 has not advanced for 2520 s",
                  "8 GPUs held for 3"):  # fmt: skip
        assert words in text, words
    assert message.link == "https://console.example.com/jobs/7/"
    assert not re.search(r"[\u4e00-\u9fff]", text)


def test_it_says_it_all_in_chinese_but_names() -> None:
    facts = FACTS | {"workload": FACTS["workload"] | {"reason": STALLED}}
    message = render(facts, "zh-hans", T0 + timedelta(minutes=3))
    text = "\n".join([message.title, *message.lines, message.link_text])
    assert "工作负载停滞" in text and "原因" in text
    assert not re.search(r"[A-Za-z]{2,}", KEPT.sub("", text)), KEPT.sub("", text)


def test_it_says_a_resolved_condition_and_a_clusters_return() -> None:
    message = render(FACTS | {"resolved": True}, "en", T0)
    assert message.title == "[Trainyard] Workload stalled: resolved: ppo-7b"
    back = render({"event": "cluster.recovered", "resolved": True, "cluster": "gpu-a"}, "en", T0)
    assert back.title == "[Trainyard] Cluster recovered: gpu-a" and back.lines == ["Cluster gpu-a"]
