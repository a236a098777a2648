// enerf's splat page: reads the splats embedded in the page (decode.js; layout: pagepack.py), draws them
// with createSplatRenderer (renderer.js) and lets the reader orbit them. On a slow renderer (software
// WebGL) a camera move is answered at once by a preview (the first, most important splats, at half
// resolution, sized to a time budget) and the full frame follows in steps short enough that the next
// move is not kept waiting; where the full frame fits the budget, every frame is full.
"use strict";
(async () => {
  const hook = { ready: false, error: null, framesDrawn: 0, fullFrames: 0, moveId: 0, fullMoveId: 0,
                 lastFrameMs: NaN, lastMoveMs: NaN, lastFullMs: NaN, count: 0, width: 0, height: 0 };
  window.enerfSplat = hook;
  const status = document.getElementById("status");
  function fail(message) { hook.error = message; status.textContent = message; throw new Error(message); }

  const header = JSON.parse(document.getElementById("enerf-header").textContent);
  const canvas = document.getElementById("canvas");
  const gl = canvas.getContext("webgl2", { antialias: false, alpha: false, preserveDrawingBuffer: false });
  if (!gl) fail("This page needs WebGL2, which this browser does not offer.");
  if (typeof DecompressionStream === "undefined") {
    fail("This page needs a browser that can unzip (DecompressionStream): Chrome 80, Firefox 113, Safari 16.4 or later.");
  }
  let R, n;
  try {
    const splats = await decodePageSplats(header, document.getElementById("enerf-data").textContent);
    n = splats.n;
    R = createSplatRenderer(gl, splats);
  } catch (e) { fail(String(e.message || e)); }
  hook.count = n;

  // ---- the camera: c2w with OpenGL axes (columns right, up, back, position) ----
  const sub = (a, b) => [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
  const add = (a, b) => [a[0] + b[0], a[1] + b[1], a[2] + b[2]];
  const mul = (a, s) => [a[0] * s, a[1] * s, a[2] * s];
  const dot = (a, b) => a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
  const norm = (a) => mul(a, 1 / Math.hypot(a[0], a[1], a[2]));
  function rotate(v, axis, angle) {  // Rodrigues
    const c = Math.cos(angle), s = Math.sin(angle), k = norm(axis), d = dot(k, v) * (1 - c);
    const x = [k[1] * v[2] - k[2] * v[1], k[2] * v[0] - k[0] * v[2], k[0] * v[1] - k[1] * v[0]];
    return [v[0] * c + x[0] * s + k[0] * d, v[1] * c + x[1] * s + k[1] * d, v[2] * c + x[2] * s + k[2] * d];
  }
  const up = norm(header.up);
  const cam = { right: [1, 0, 0], up: [0, 1, 0], back: [0, 0, 1], pos: [0, 0, 0], fovY: 50, dist: 1, index: 0 };
  // moveTime: when the first change not yet drawn happened (an input event's own time stamp, which
  // counts the time it waited for the page; else now)
  let dirty = true, moveTime = performance.now(), eventTime = null;
  function changed() {
    const t = eventTime === null ? performance.now() : eventTime;
    eventTime = null;
    if (!dirty) moveTime = t;
    dirty = true;
  }
  function setC2w(m, fovY, dist) {  // m: 16 numbers, row-major 4x4
    cam.right = norm([m[0], m[4], m[8]]); cam.up = norm([m[1], m[5], m[9]]); cam.back = norm([m[2], m[6], m[10]]);
    cam.pos = [m[3], m[7], m[11]];
    if (fovY) cam.fovY = fovY;
    if (dist) cam.dist = dist;
    changed();
  }
  const target = () => sub(cam.pos, mul(cam.back, cam.dist));
  function goTo(i) {
    const k = header.cameras.length;
    cam.index = ((i % k) + k) % k;
    const c = header.cameras[cam.index];
    setC2w(c.c2w.flat(), c.fov_y, c.distance);
    document.getElementById("which").textContent = `${cam.index + 1} / ${k}`;
  }
  function orbit(yaw, pitch) {
    const t = target();
    let rel = sub(cam.pos, t);
    for (const k of ["right", "up", "back"]) cam[k] = rotate(cam[k], up, yaw);
    rel = rotate(rel, up, yaw);
    const back = rotate(cam.back, cam.right, pitch);
    if (Math.abs(dot(back, up)) < 0.995) {
      cam.up = rotate(cam.up, cam.right, pitch); cam.back = back; rel = rotate(rel, cam.right, pitch);
    }
    cam.pos = add(t, rel);
    changed();
  }
  function pan(dx, dy) {
    const s = cam.dist * 2 * Math.tan(cam.fovY * Math.PI / 360) / canvas.height;
    cam.pos = add(cam.pos, add(mul(cam.right, -dx * s), mul(cam.up, dy * s)));
    changed();
  }
  function zoom(factor) {
    const t = target();
    cam.dist *= factor;
    cam.pos = add(t, mul(cam.back, cam.dist));
    changed();
  }

  // ---- input: drag orbits, right/shift drag pans, wheel zooms, two fingers pinch ----
  const pointers = new Map();
  canvas.addEventListener("contextmenu", (e) => e.preventDefault());
  canvas.addEventListener("pointerdown", (e) => {
    canvas.setPointerCapture(e.pointerId);
    pointers.set(e.pointerId, { x: e.clientX, y: e.clientY, pan: e.button === 2 || e.shiftKey });
  });
  canvas.addEventListener("pointerup", (e) => pointers.delete(e.pointerId));
  canvas.addEventListener("pointercancel", (e) => pointers.delete(e.pointerId));
  canvas.addEventListener("pointermove", (e) => {
    const p = pointers.get(e.pointerId);
    if (!p) return;
    eventTime = e.timeStamp;
    const dx = e.clientX - p.x, dy = e.clientY - p.y;
    if (pointers.size === 2) {
      const [a, b] = [...pointers.values()];
      const before = Math.hypot(a.x - b.x, a.y - b.y);
      p.x = e.clientX; p.y = e.clientY;
      const after = Math.hypot(a.x - b.x, a.y - b.y);
      if (before > 0 && after > 0) zoom(before / after);
      pan(dx / 2, dy / 2);
      return;
    }
    p.x = e.clientX; p.y = e.clientY;
    if (p.pan || e.shiftKey) pan(dx, dy); else orbit(-dx * 0.005, -dy * 0.005);
  });
  canvas.addEventListener("wheel", (e) => { e.preventDefault(); eventTime = e.timeStamp; zoom(Math.exp(e.deltaY * 0.001)); }, { passive: false });
  window.addEventListener("keydown", (e) => {
    const step = { n: 1, ArrowRight: 1, p: -1, ArrowLeft: -1, r: 0 }[e.key];
    if (step === undefined) return;
    eventTime = e.timeStamp;
    goTo(cam.index + step);
  });
  document.getElementById("prev").addEventListener("click", () => goTo(cam.index - 1));
  document.getElementById("next").addEventListener("click", () => goTo(cam.index + 1));

  // ---- frames: a preview (or the full frame, where it is fast) after each move, then the full frame ----
  const BUDGET = 100, STEP = 40;  // ms: a frame that follows a move; a step of the full frame
  const bg = header.background, now = () => performance.now();
  let previewCount = Math.min(n, 20000), chunk = 2000, fullFast = false, refining = null;
  function viewMatrix() {  // world -> camera with x right, y down, z forward (column-major)
    const rows = [cam.right, mul(cam.up, -1), mul(cam.back, -1)], view = new Float32Array(16);
    for (let r = 0; r < 3; r++) {
      for (let c = 0; c < 3; c++) view[4 * c + r] = rows[r][c];
      view[12 + r] = -dot(rows[r], cam.pos);
    }
    view[15] = 1;
    return view;
  }
  const focal = (h) => 0.5 * h / Math.tan(cam.fovY * Math.PI / 360);
  function shown(extra) {
    Object.assign(hook, extra, { framesDrawn: hook.framesDrawn + 1, width: canvas.width, height: canvas.height,
                                 focal: focal(canvas.height), ready: true });
    status.textContent = `${n.toLocaleString()} splats · ${hook.quality} ${hook.lastFrameMs.toFixed(0)} ms` +
      (isNaN(hook.lastFullMs) ? "" : ` · full frame ${hook.lastFullMs.toFixed(0)} ms`);
  }
  function preview() {
    const t0 = now(), moved = moveTime, full = fullFast;
    const count = full ? n : previewCount, scale = full ? 1 : 0.5;
    const w = canvas.width, h = canvas.height, view = viewMatrix(), range = { lo: Infinity, hi: -Infinity };
    R.depths(view, 0, count, range);
    const m = R.sortKeys(count, range);
    R.shade(cam.pos, 0, count);
    R.upload(count, m);
    const t = R.target(Math.max(1, Math.round(w * scale)), Math.max(1, Math.round(h * scale)));
    R.begin(t, view, focal(t.h), bg);
    R.draw(t, 0, m);
    R.show(t, w, h);
    const t1 = now();
    if (!full) previewCount = Math.round(Math.min(n, Math.max(Math.min(n, 2000),
                                                               count * Math.min(2, Math.max(0.25, BUDGET / (t1 - t0))))));
    const moveId = hook.moveId + 1;
    const fullCounters = full ? { fullFrames: hook.fullFrames + 1, fullMoveId: moveId, lastFullMs: t1 - moved,
                                  lastFullWorkMs: t1 - t0 } : {};
    shown({ lastFrameMs: t1 - t0, lastMoveMs: t1 - moved, quality: full ? "full" : "preview", drawn: m,
            previewSplats: count, previewScale: scale, moveId, ...fullCounters });
  }
  function* refine() {  // the full frame in steps of about STEP ms; dropped when the camera moves
    const moved = moveTime, moveId = hook.moveId, view = viewMatrix(), pos = cam.pos.slice(), range = { lo: Infinity, hi: -Infinity };
    const w = canvas.width, h = canvas.height;
    let work = 0, t0 = now();
    const pause = function* (always) {
      const t = now();
      if (always || t - t0 > STEP) { work += t - t0; yield; t0 = now(); }
    };
    for (let a = 0; a < n; a += 8192) { R.depths(view, a, Math.min(n, a + 8192), range); yield* pause(); }
    const m = R.sortKeys(n, range);
    yield* pause();
    for (let a = 0; a < n; a += 8192) { R.shade(pos, a, Math.min(n, a + 8192)); yield* pause(); }
    R.upload(n, m);
    const t = R.target(w, h);
    R.begin(t, view, focal(h), bg);
    for (let start = 0; start < m;) {  // a step a chunk, the chunk sized to STEP
      yield* pause(true);
      const c = Math.min(chunk, m - start);
      R.draw(t, start, c);
      start += c;
      chunk = Math.max(500, Math.round(c * Math.min(2, Math.max(0.25, STEP / Math.max(1, now() - t0)))));
    }
    R.show(t, w, h);
    work += now() - t0;
    fullFast = work < BUDGET;
    shown({ fullFrames: hook.fullFrames + 1, fullMoveId: moveId, lastFullMs: now() - moved, lastFullWorkMs: work, quality: "full", drawn: m });
  }
  function frame() {
    requestAnimationFrame(frame);
    const w = Math.max(1, Math.round(canvas.clientWidth * devicePixelRatio));
    const h = Math.max(1, Math.round(canvas.clientHeight * devicePixelRatio));
    if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; changed(); }
    if (dirty) {
      dirty = false;
      preview();
      refining = fullFast ? null : refine();
    } else if (refining && refining.next().done) refining = null;
  }

  Object.assign(hook, {
    setCamera(c2w16, fovY) { setC2w(c2w16, fovY); },
    getCamera() {
      const { right: r, up: u, back: b, pos: p } = cam;
      return [r[0], u[0], b[0], p[0], r[1], u[1], b[1], p[1], r[2], u[2], b[2], p[2], 0, 0, 0, 1];
    },
    goToCamera: goTo,
    orbit, pan, zoom,
    showHud(visible) { document.getElementById("hud").style.display = visible ? "" : "none"; },
  });
  goTo(0);
  requestAnimationFrame(frame);
})();
