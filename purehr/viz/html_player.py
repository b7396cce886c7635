"""A single-file HTML player for the training replay.

Everything is embedded (video and poster as base64 data URIs, the timeline as JSON), so the
file can be mailed, attached to a report or opened from a results/ folder with no server;
a slider with one stop per checkpoint seeks the video to where that checkpoint begins.

The page fits a laptop screen (1400 x 900): the video is as tall as the window leaves room for
under the title and above the slider, so the slider is never below the fold. The video has no
native controls: their bar lies over the bottom of the frame, where the legend is; a play
button beside the slider (or a click on the video) plays and pauses it instead.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

from purehr.run.store.files import atomic_write_text

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
  body {{ font-family: system-ui, sans-serif; margin: 0.6rem auto; max-width: 1300px;
         padding: 0 0.8rem; color: #222; }}
  h1 {{ font-size: 1.25rem; margin: 0 0 0.4rem; }}
  video {{ display: block; width: 100%; max-height: calc(100vh - {reserved_rem}rem); background: #000;
          cursor: pointer; }}
  .controls {{ display: flex; align-items: center; gap: 1rem; margin-top: 0.4rem; }}
  .controls input {{ flex: 1; }}
  #play {{ min-width: 5.5rem; }}
  #checkpoint-label {{ min-width: 26rem; font-variant-numeric: tabular-nums; }}
  .description {{ font-size: 0.9rem; margin: 0.5rem 0; }}
</style>
</head>
<body>
<h1>{title}</h1>
<video id="replay" muted playsinline preload="auto"
       poster="data:image/png;base64,{poster}">
  <source type="video/mp4" src="data:video/mp4;base64,{video}">
  Your browser cannot play embedded H.264 video.
</video>
<div class="controls">
  <button type="button" id="play">&#9654; play</button>
  <label for="checkpoint">checkpoint</label>
  <input type="range" id="checkpoint" min="0" max="{last_index}" step="1" value="{poster_index}"
         list="checkpoint-stops">
  <output id="checkpoint-label" for="checkpoint"></output>
</div>
<datalist id="checkpoint-stops">
{options}
</datalist>
<p class="description">{description}</p>
<script>
const TIMELINE = {timeline_json};
const video = document.getElementById("replay");
const slider = document.getElementById("checkpoint");
const label = document.getElementById("checkpoint-label");
const play = document.getElementById("play");
const checkpoints = TIMELINE.checkpoints;

// the words of the video frames' titles (purehr.viz.replay.checkpoint_label)
const NUM_CHECKPOINTS = TIMELINE.num_checkpoints ?? checkpoints.length;
const POSTER_INDEX = TIMELINE.poster_checkpoint ?? checkpoints.length - 1;
function describe(index) {{
  const c = checkpoints[index];
  const success = Number.isFinite(c.eval_success_rate)
    ? `, held-out success ${{(100 * c.eval_success_rate).toFixed(0)}}%` : "";
  return `checkpoint ${{c.index + 1}} of ${{NUM_CHECKPOINTS}}: ` +
         `${{c.actual_steps.toLocaleString("en")}} env steps${{success}}`;
}}
function show(index) {{
  slider.value = index;
  label.textContent = describe(index);
}}
slider.addEventListener("input", () => {{
  const index = Number(slider.value);
  video.currentTime = checkpoints[index].start_s + 0.001;
  show(index);
}});
video.addEventListener("timeupdate", () => {{
  let index = checkpoints.findIndex(c => video.currentTime < c.end_s);
  if (index < 0) index = checkpoints.length - 1;
  if (index !== Number(slider.value)) show(index);
}});
function togglePlay() {{
  if (video.paused) video.play(); else video.pause();
}}
play.addEventListener("click", togglePlay);
video.addEventListener("click", togglePlay);
video.addEventListener("play", () => {{ play.textContent = "\u275a\u275a pause"; }});
video.addEventListener("pause", () => {{ play.textContent = "\u25b6 play"; }});
show(POSTER_INDEX);   // the poster is that checkpoint's frame: slider and poster agree until play
</script>
</body>
</html>
"""


RESERVED_REM = 7.5
"""Height (rem) the page keeps free of the video: margins, the title and the slider's row."""


def _base64_file(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode("ascii")


def _steps_label(steps: float) -> str:
    return f"{steps / 1e6:g}M" if steps >= 1e6 else f"{steps / 1e3:g}k"


def write_html_player(
    path: Path, video_path: Path, poster_path: Path, timeline: dict[str, Any], *, title: str, description: str = ""
) -> Path:
    """Write the player; ``timeline["checkpoints"]`` entries need ``index`` (the checkpoint's
    row), ``start_s``, ``end_s``, ``actual_steps``, ``target_steps`` and optionally
    ``eval_success_rate``; ``timeline["num_checkpoints"]`` and ``["poster_checkpoint"]`` (the
    entry the poster shows, where the slider starts) default to the entries' count and the
    last entry."""
    options = "\n".join(
        f'  <option value="{index}" label="{_steps_label(entry["target_steps"])}"></option>'
        for index, entry in enumerate(timeline["checkpoints"])
    )
    # "</" inside a <script> would end it early; JSON allows escaping the slash.
    timeline_json = json.dumps(timeline, allow_nan=False).replace("</", "<\\/")
    page = _PAGE.format(
        title=html.escape(title),
        description=html.escape(description),
        poster=_base64_file(poster_path),
        video=_base64_file(video_path),
        last_index=len(timeline["checkpoints"]) - 1,
        options=options,
        poster_index=timeline.get("poster_checkpoint", len(timeline["checkpoints"]) - 1),
        reserved_rem=RESERVED_REM,
        timeline_json=timeline_json,
    )
    return atomic_write_text(path, page)
