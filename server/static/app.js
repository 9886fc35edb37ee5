// The demo page: microphone -> AudioWorklet -> 16-bit PCM at the device's rate -> /v1/stream.
// The server resamples, so the page sends the rate the browser captures at. Query options:
// ?token=T for a server with bearer tokens, ?autostart=1&seconds=S to record S seconds on
// load (what the headless browser test does).

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
// A pause this long ends a segment: its final comes at once, and the finals accumulate as
// the user speaks, rather than all of it arriving only at Stop.
const ENDPOINT_MS = 700;
// The server fits a profile of your voice from what you say (after 15 s, again at 30 and
// 60 s) and hears the rest through it; the page keeps the latest, so your next session is
// heard through it from its first word. Forget it with ?forget=1.
const PROFILE_KEY = "harken.speaker_profile";
if (params.get("forget")) localStorage.removeItem(PROFILE_KEY);
let session = null;

function setStatus(text, isError = false) {
  $("status").textContent = text;
  $("status").className = isError ? "error" : "";
}

function toPcm16(block) {
  const out = new Int16Array(block.length);
  for (let i = 0; i < block.length; i++) {
    const s = Math.max(-1, Math.min(1, block[i]));
    out[i] = s < 0 ? s * 0x8000 : s * 0x7fff;
  }
  return out.buffer;
}

function streamUrl() {
  const url = new URL("/v1/stream", location.href);
  url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  if (params.get("token")) url.searchParams.set("token", params.get("token"));
  return url.href;
}

function onMessage(event) {
  const msg = JSON.parse(event.data);
  if (msg.type === "partial") {
    $("stable").textContent = msg.stable; // words no later audio will change
    $("partial").textContent = msg.text.slice(msg.stable.length);
  } else if (msg.type === "final") {
    $("final").textContent = ($("final").textContent + " " + msg.text).trim();
    $("stable").textContent = "";
    $("partial").textContent = "";
  } else if (msg.type === "speaker_profile") {
    localStorage.setItem(PROFILE_KEY, msg.profile);
    setStatus(`listening, adapted to your voice (${msg.seconds} s of it)`);
  } else if (msg.type === "error") {
    // a kept profile this server cannot use (another model): forget it, the next one is new
    if (msg.message.startsWith("speaker_profile")) localStorage.removeItem(PROFILE_KEY);
    setStatus(`error: ${msg.message}`, true);
  }
}

async function start() {
  const media = await navigator.mediaDevices.getUserMedia({
    audio: { channelCount: 1, echoCancellation: false, noiseSuppression: false, autoGainControl: false },
  });
  const context = new AudioContext();
  await context.audioWorklet.addModule("/static/pcm-worklet.js");
  const source = context.createMediaStreamSource(media);
  const tap = new AudioWorkletNode(context, "pcm-tap");
  const ws = new WebSocket(streamUrl());
  ws.binaryType = "arraybuffer";
  ws.onmessage = onMessage;
  const current = { media, context, ws, tap };
  ws.onclose = (e) => {
    setStatus(e.code === 1000 ? "done" : `closed (${e.code}${e.reason ? ": " + e.reason : ""})`, e.code !== 1000);
    document.body.dataset.state = "closed";
    stopCapture(current);
    if (session === current) {
      session = null;
      $("toggle").textContent = "Start";
    }
  };
  ws.onopen = () => {
    const config = {
      type: "config",
      sample_rate: context.sampleRate,
      encoding: "pcm_s16le",
      endpoint_ms: ENDPOINT_MS,
      adapt_speaker: true,
      punctuate: true, // written text: punctuation and capitals, where the model has them
    };
    const kept = localStorage.getItem(PROFILE_KEY);
    if (kept) config.speaker_profile = kept;
    ws.send(JSON.stringify(config));
    tap.port.onmessage = (e) => ws.readyState === WebSocket.OPEN && ws.send(toPcm16(e.data));
    source.connect(tap);
    setStatus(`listening at ${context.sampleRate} Hz`);
    document.body.dataset.state = "listening";
  };
  session = current;
  $("toggle").textContent = "Stop";
}

function stopCapture(s) {
  s.tap.port.onmessage = null;
  s.media.getTracks().forEach((t) => t.stop());
  if (s.context.state !== "closed") s.context.close();
}

function stop() {
  if (!session) return;
  stopCapture(session);
  if (session.ws.readyState === WebSocket.OPEN) session.ws.send(JSON.stringify({ type: "eos" }));
  setStatus("finishing");
  session = null;
  $("toggle").textContent = "Start";
}

$("toggle").onclick = () => (session ? stop() : start().catch((e) => setStatus(String(e), true)));

if (params.get("autostart")) {
  start()
    .then(() => setTimeout(stop, 1000 * Number(params.get("seconds") || 5)))
    .catch((e) => setStatus(String(e), true));
}
