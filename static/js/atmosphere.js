// The studio's atmosphere, all of it optional and off until the player turns it on (each
// setting kept in localStorage): chip and card sounds, a tick in the countdown's last five
// seconds, and the game called out loud — "place your bets", "no more bets", the results —
// in the page's language by the browser's own speech synthesis. Every sound is made here
// with WebAudio (no file to download, nothing to license); the voice is the device's.
//
// Test hooks: <body data-sound-log> lists the sounds played ("chip card tick …", the last
// 60), and each call-out is a SpeechSynthesisUtterance the tests can catch.

import { t, lang } from "./i18n.js";

const PREFS = { effects: "livetable.effects", countdown: "livetable.countdownTick", voice: "livetable.voice" };
const VOICE_LANG = { en: "en-US", th: "th-TH", hi: "hi-IN" };

function read(key) { try { return localStorage.getItem(key) === "on"; } catch { return false; } }
function write(key, on) { try { localStorage.setItem(key, on ? "on" : "off"); } catch { /* private mode */ } }

export const atmosphere = {
  effects: read(PREFS.effects),
  countdown: read(PREFS.countdown),
  voice: read(PREFS.voice),
};

let audio = null;

/** The page's one AudioContext, made (or resumed) on a user gesture: browsers allow sound
 * only after one. */
export function audioContext() {
  try {
    audio = audio || new AudioContext();
    if (audio.state === "suspended") audio.resume();
  } catch { audio = null; }
  return audio;
}

function logSound(name) {
  const log = (document.body.dataset.soundLog || "").split(" ").filter(Boolean);
  log.push(name);
  document.body.dataset.soundLog = log.slice(-60).join(" ");
}

/** A short burst of filtered noise: a chip landing, a card sliding or turning. */
function noise(ac, { at, ms, freq, q, gain }) {
  const n = Math.ceil(ac.sampleRate * ms / 1000);
  const buffer = ac.createBuffer(1, n, ac.sampleRate);
  const data = buffer.getChannelData(0);
  for (let i = 0; i < n; i++) data[i] = (Math.random() * 2 - 1) * (1 - i / n) ** 2;
  const src = ac.createBufferSource();
  src.buffer = buffer;
  const filter = ac.createBiquadFilter();
  filter.type = "bandpass";
  filter.frequency.value = freq;
  filter.Q.value = q;
  const g = ac.createGain();
  g.gain.value = gain;
  src.connect(filter).connect(g).connect(ac.destination);
  src.start(at);
}

function tone(ac, { at, freq, ms, gain, type = "sine" }) {
  const osc = ac.createOscillator();
  const g = ac.createGain();
  osc.type = type;
  osc.frequency.value = freq;
  g.gain.setValueAtTime(0.0001, at);
  g.gain.exponentialRampToValueAtTime(gain, at + 0.005);
  g.gain.exponentialRampToValueAtTime(0.0001, at + ms / 1000);
  osc.connect(g).connect(ac.destination);
  osc.start(at);
  osc.stop(at + ms / 1000 + 0.02);
}

const SOUNDS = {
  // two clicks close together: a chip on a chip
  chip: (ac, at) => { noise(ac, { at, ms: 35, freq: 3200, q: 4, gain: 0.5 }); noise(ac, { at: at + 0.045, ms: 30, freq: 2600, q: 4, gain: 0.35 }); },
  // a soft swish: a card dealt across the felt
  card: (ac, at) => noise(ac, { at, ms: 120, freq: 1400, q: 0.8, gain: 0.35 }),
  // a snap: a card turned face up
  flip: (ac, at) => noise(ac, { at, ms: 50, freq: 2200, q: 1.5, gain: 0.5 }),
  tick: (ac, at) => tone(ac, { at, freq: 1320, ms: 70, gain: 0.12, type: "square" }),
  last: (ac, at) => tone(ac, { at, freq: 880, ms: 260, gain: 0.18, type: "triangle" }),
};

/** Play one of the sounds above, if its setting is on. */
export function play(name) {
  const on = name === "tick" || name === "last" ? atmosphere.countdown : atmosphere.effects;
  if (!on) return;
  logSound(name);
  const ac = audioContext();
  if (!ac) return;
  SOUNDS[name](ac, ac.currentTime + 0.01);
}

/** Say `text` in the page's language (when the voice is on); a newer call-out replaces an
 * older one still waiting, so the voice never lags the table. */
export function say(text) {
  if (!atmosphere.voice || !text || !("speechSynthesis" in self)) return;
  const u = new SpeechSynthesisUtterance(text);
  u.lang = VOICE_LANG[lang()] || "en-US";
  const voice = speechSynthesis.getVoices().find((v) => v.lang && v.lang.replace("_", "-").startsWith(u.lang.slice(0, 2)));
  if (voice) u.voice = voice;
  u.rate = 1.05;
  speechSynthesis.cancel();
  speechSynthesis.speak(u);
}

/** The three switches of the "Sound & voice" panel. */
export function bindAtmosphere({ effects, countdown, voice }) {
  for (const [key, input] of [["effects", effects], ["countdown", countdown], ["voice", voice]]) {
    input.checked = atmosphere[key];
    input.addEventListener("change", () => {
      atmosphere[key] = input.checked;
      write(PREFS[key], input.checked);
      if (input.checked && key !== "voice") audioContext();  // this click is the gesture
      if (input.checked && key === "voice") say(t("atmo.voice"));  // so the player hears it
    });
  }
}
