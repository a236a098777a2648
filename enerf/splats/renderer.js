// A small WebGL2 renderer of 3D Gaussians (in the style of antimatter15/splat), for enerf's splat page.
// Every splat is a quad (4 vertices, 2 triangles, a static index buffer; the vertex shader reads the
// splat through gl_VertexID from textures, as SwiftShader runs instanced draws slowly): the vertex
// shader projects its 3D covariance to a 2D conic (3DGS: J W Sigma W^T J^T + 0.3 px low-pass) and
// sizes the quad where its alpha falls below 1/255; the fragment shader blends it back to front
// (premultiplied "over", alpha clamped at 0.99) after a depth sort on the CPU (sortKeys).
"use strict";
function createSplatRenderer(gl, s) {  // s: {n, means, cov, covExp, rgba, sh1, sh1Scale, antialiased}
  const VS = `#version 300 es
precision highp float; precision highp int;
uniform highp usampler2D u_data;  // 2 texels a splat: x, y, z, cov01 | cov23, cov45 (half pairs), 128 + exponent
uniform sampler2D u_color;        // RGBA8: colour, opacity
uniform highp usampler2D u_order; // the splats back to front, 1024 a row
uniform mat4 u_view;              // world -> camera, x right, y down, z forward
uniform vec2 u_focal;             // pixels
uniform vec2 u_viewport;          // pixels
uniform bool u_antialiased;       // the 2D mip filter: opacity times sqrt(det / det with the low-pass)
out vec4 v_color;
out vec2 v_offset;                // pixels from the centre
out vec3 v_conic;
void main() {
  int slot = gl_VertexID >> 2;
  uint i = texelFetch(u_order, ivec2(slot & 1023, slot >> 10), 0).r;
  vec2 corner = vec2(float((gl_VertexID & 1) * 2 - 1), float((gl_VertexID & 2) - 1));
  v_color = texelFetch(u_color, ivec2(int(i & 1023u), int(i >> 10)), 0);
  ivec2 t = ivec2(int((i & 1023u) << 1), int(i >> 10));
  uvec4 d0 = texelFetch(u_data, t, 0);
  vec4 cam = u_view * vec4(uintBitsToFloat(d0.xyz), 1.0);
  gl_Position = vec4(0.0, 0.0, 2.0, 1.0);  // culled unless set below
  if (cam.z < __NEAR__ || v_color.a * __ALPHA_STEPS__ <= 1.0) return;
  uvec4 d1 = texelFetch(u_data, t + ivec2(1, 0), 0);
  vec2 c01 = unpackHalf2x16(d0.w), c23 = unpackHalf2x16(d1.x), c45 = unpackHalf2x16(d1.y);
  mat3 V = exp2(float(d1.z) - 128.0) * mat3(c01.x, c01.y, c23.x, c01.y, c23.y, c45.x, c23.x, c45.x, c45.y);
  vec2 lim = __FOV_CLAMP__ * 0.5 * u_viewport / u_focal;  // 3DGS clamps x/z and y/z to 1.3 tan(fov / 2)
  vec2 xy = clamp(cam.xy / cam.z, -lim, lim);
  float iz = 1.0 / cam.z;
  mat3 J = mat3(u_focal.x * iz, 0.0, 0.0, 0.0, u_focal.y * iz, 0.0,
                -u_focal.x * xy.x * iz, -u_focal.y * xy.y * iz, 0.0);
  mat3 T = J * mat3(u_view);
  mat3 c2 = T * V * transpose(T);
  float a = c2[0][0] + __LOW_PASS__, b = c2[0][1], c = c2[1][1] + __LOW_PASS__;
  float det = a * c - b * b;
  if (det <= 0.0) return;
  if (u_antialiased) {
    v_color.a *= sqrt(clamp((c2[0][0] * c2[1][1] - b * b) / det, 0.0, 1.0));
    if (v_color.a * __ALPHA_STEPS__ <= 1.0) return;
  }
  float mid = 0.5 * (a + c), r = length(vec2(0.5 * (a - c), b));
  float l1 = mid + r, l2 = max(mid - r, 1e-4);
  vec2 e1 = abs(b) > 1e-9 ? normalize(vec2(b, l1 - a)) : (a >= c ? vec2(1.0, 0.0) : vec2(0.0, 1.0));
  float extent = sqrt(2.0 * log(v_color.a * __ALPHA_STEPS__));  // beyond it the alpha is below 1/255
  v_offset = extent * (corner.x * sqrt(l1) * e1 + corner.y * sqrt(l2) * vec2(-e1.y, e1.x));
  vec2 p = (cam.xy * iz * u_focal + v_offset) * 2.0 / u_viewport;
  gl_Position = vec4(p.x, -p.y, 0.0, 1.0);
  v_conic = vec3(c, -b, a) / det;
}`;
  const FS = `#version 300 es
precision highp float;
in vec4 v_color; in vec2 v_offset; in vec3 v_conic;
out vec4 fragColor;
void main() {
  float power = -0.5 * (v_conic.x * v_offset.x * v_offset.x + v_conic.z * v_offset.y * v_offset.y)
                - v_conic.y * v_offset.x * v_offset.y;
  float alpha = min(__ALPHA_MAX__, v_color.a * exp(power));
  if (alpha < 1.0 / __ALPHA_STEPS__) discard;
  fragColor = vec4(v_color.rgb * alpha, alpha);
}`;
  function shader(type, src) {
    const sh = gl.createShader(type);
    gl.shaderSource(sh, src);
    gl.compileShader(sh);
    if (!gl.getShaderParameter(sh, gl.COMPILE_STATUS)) throw new Error("shader: " + gl.getShaderInfoLog(sh));
    return sh;
  }
  const program = gl.createProgram();
  gl.attachShader(program, shader(gl.VERTEX_SHADER, VS));
  gl.attachShader(program, shader(gl.FRAGMENT_SHADER, FS));
  gl.linkProgram(program);
  if (!gl.getProgramParameter(program, gl.LINK_STATUS)) throw new Error("program: " + gl.getProgramInfoLog(program));
  gl.useProgram(program);
  const U = {};
  for (const name of ["u_data", "u_color", "u_order", "u_view", "u_focal", "u_viewport", "u_antialiased"])
    U[name] = gl.getUniformLocation(program, name);

  const n = s.n, rows = Math.max(1, Math.ceil(n / 1024));
  function texture(unit, internal, format, type, width, pixels) {
    gl.activeTexture(gl.TEXTURE0 + unit);
    gl.bindTexture(gl.TEXTURE_2D, gl.createTexture());
    for (const p of [gl.TEXTURE_MIN_FILTER, gl.TEXTURE_MAG_FILTER]) gl.texParameteri(gl.TEXTURE_2D, p, gl.NEAREST);
    gl.texImage2D(gl.TEXTURE_2D, 0, internal, width, rows, 0, format, type, pixels);
  }
  const data = new Uint32Array(1024 * rows * 8);
  const meanBits = new Uint32Array(s.means.buffer, s.means.byteOffset, n * 3);
  for (let i = 0; i < n; i++) {
    data[8 * i] = meanBits[3 * i]; data[8 * i + 1] = meanBits[3 * i + 1]; data[8 * i + 2] = meanBits[3 * i + 2];
    data[8 * i + 3] = s.cov[3 * i]; data[8 * i + 4] = s.cov[3 * i + 1]; data[8 * i + 5] = s.cov[3 * i + 2];
    data[8 * i + 6] = s.covExp[i] + 128;  // the covariance's power of two, biased
  }
  texture(0, gl.RGBA32UI, gl.RGBA_INTEGER, gl.UNSIGNED_INT, 2048, data);
  const colors = new Uint8Array(1024 * rows * 4);
  colors.set(s.rgba);
  texture(1, gl.RGBA8, gl.RGBA, gl.UNSIGNED_BYTE, 1024, colors);
  const order = new Uint32Array(1024 * rows);
  texture(2, gl.R32UI, gl.RED_INTEGER, gl.UNSIGNED_INT, 1024, order);
  gl.uniform1i(U.u_data, 0);
  gl.uniform1i(U.u_color, 1);
  gl.uniform1i(U.u_order, 2);
  gl.uniform1i(U.u_antialiased, s.antialiased ? 1 : 0);
  gl.bindVertexArray(gl.createVertexArray());  // no attributes
  const quads = new Uint32Array(6 * n);  // splat k: vertices 4k .. 4k + 3
  for (let k = 0, v = 0; k < 6 * n; k += 6, v += 4) {
    quads[k] = v; quads[k + 1] = quads[k + 4] = v + 1; quads[k + 2] = quads[k + 5] = v + 2; quads[k + 3] = v + 3;
  }
  gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, gl.createBuffer());
  gl.bufferData(gl.ELEMENT_ARRAY_BUFFER, quads, gl.STATIC_DRAW);
  gl.disable(gl.DEPTH_TEST);
  gl.enable(gl.BLEND);
  gl.blendFunc(gl.ONE, gl.ONE_MINUS_SRC_ALPHA);

  // ---- sorting (log depth, 16-bit counting sort, far first) and SH band 1, over splats [0, count) ----
  const logDepth = new Float32Array(n), keys = new Int32Array(n), counts = new Uint32Array(65536);
  const C1 = 0.4886025119029199, shScale = (s.sh1Scale || 0) / 127;
  function depths(view, a, b, range) {  // log camera depth of splats [a, b); range: {lo, hi} so far
    const r0 = view[2], r1 = view[6], r2 = view[10], r3 = view[14], m = s.means;
    let lo = range.lo, hi = range.hi;
    for (let i = a; i < b; i++) {
      const z = r0 * m[3 * i] + r1 * m[3 * i + 1] + r2 * m[3 * i + 2] + r3;
      const d = z > __NEAR__ ? Math.log(z) : -Infinity;
      logDepth[i] = d;
      if (d > -Infinity) { if (d < lo) lo = d; if (d > hi) hi = d; }
    }
    range.lo = lo; range.hi = hi;
  }
  function sortKeys(count, range) {  // order[0, m) = the splats in front, far first; returns m
    counts.fill(0);
    const hi = range.hi, scale = 65535 / Math.max(range.hi - range.lo, 1e-6);
    let m = 0;
    for (let i = 0; i < count; i++) {
      const d = logDepth[i];
      if (d === -Infinity) { keys[i] = -1; continue; }
      const k = ((hi - d) * scale) | 0;
      keys[i] = k; counts[k]++; m++;
    }
    for (let k = 1; k < 65536; k++) counts[k] += counts[k - 1];
    for (let i = count - 1; i >= 0; i--) if (keys[i] >= 0) order[--counts[keys[i]]] = i;
    return m;
  }
  function shade(pos, a, b) {  // colours of splats [a, b) seen from pos: band 0 + band 1
    if (!s.sh1) return;
    const m = s.means, sh = s.sh1, base = s.rgba, [px, py, pz] = pos;
    for (let i = a; i < b; i++) {
      let x = m[3 * i] - px, y = m[3 * i + 1] - py, z = m[3 * i + 2] - pz;
      const f = 255 * shScale * C1 / (Math.hypot(x, y, z) || 1);
      x *= f; y *= f; z *= f;
      for (let ch = 0; ch < 3; ch++) {
        const q = 9 * i + ch;  // sh1[i, k, ch] at 9 i + 3 k + ch; the 3DGS basis -y, z, -x
        const v = base[4 * i + ch] - y * sh[q] + z * sh[q + 3] - x * sh[q + 6];
        colors[4 * i + ch] = v < 0 ? 0 : v > 255 ? 255 : v;
      }
    }
  }
  function upload(count, m) {  // colours of [0, count) (when band 1 is shaded), order[0, m)
    if (s.sh1 && count > 0) {
      gl.activeTexture(gl.TEXTURE1);
      gl.texSubImage2D(gl.TEXTURE_2D, 0, 0, 0, 1024, Math.ceil(count / 1024), gl.RGBA, gl.UNSIGNED_BYTE, colors);
    }
    if (m > 0) {
      gl.activeTexture(gl.TEXTURE2);
      gl.texSubImage2D(gl.TEXTURE_2D, 0, 0, 0, 1024, Math.ceil(m / 1024), gl.RED_INTEGER, gl.UNSIGNED_INT, order);
    }
  }

  // ---- targets: an offscreen RGBA8 framebuffer per size, blitted onto the canvas ----
  const targets = new Map();
  function target(w, h) {
    const key = w + "x" + h;
    if (!targets.has(key)) {
      if (targets.size > 4) targets.clear();  // sizes change with the window; old ones are dropped
      const fb = gl.createFramebuffer(), tex = gl.createTexture();
      gl.activeTexture(gl.TEXTURE3);
      gl.bindTexture(gl.TEXTURE_2D, tex);
      gl.texStorage2D(gl.TEXTURE_2D, 1, gl.RGBA8, w, h);
      gl.bindFramebuffer(gl.FRAMEBUFFER, fb);
      gl.framebufferTexture2D(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0, gl.TEXTURE_2D, tex, 0);
      targets.set(key, { fb, w, h });
    }
    return targets.get(key);
  }
  const pixel = new Uint8Array(4);
  return {
    n, depths, sortKeys, shade, upload, target,
    begin(t, view, focal, bg) {  // clear target t and set the camera (focal in t's pixels)
      gl.bindFramebuffer(gl.FRAMEBUFFER, t.fb);
      gl.viewport(0, 0, t.w, t.h);
      gl.uniformMatrix4fv(U.u_view, false, view);
      gl.uniform2f(U.u_focal, focal, focal);
      gl.uniform2f(U.u_viewport, t.w, t.h);
      gl.clearColor(bg[0], bg[1], bg[2], 1);
      gl.clear(gl.COLOR_BUFFER_BIT);
    },
    draw(t, start, count) {  // the sorted splats order[start, start + count) into t, waited for
      gl.bindFramebuffer(gl.FRAMEBUFFER, t.fb);
      if (count > 0) gl.drawElements(gl.TRIANGLES, 6 * count, gl.UNSIGNED_INT, 24 * start);
      gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.UNSIGNED_BYTE, pixel);
    },
    show(t, w, h) {  // t onto the canvas (w x h), scaled linearly, waited for
      gl.bindFramebuffer(gl.READ_FRAMEBUFFER, t.fb);
      gl.bindFramebuffer(gl.DRAW_FRAMEBUFFER, null);
      gl.blitFramebuffer(0, 0, t.w, t.h, 0, 0, w, h, gl.COLOR_BUFFER_BIT, t.w === w ? gl.NEAREST : gl.LINEAR);
      gl.bindFramebuffer(gl.FRAMEBUFFER, null);
      gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.UNSIGNED_BYTE, pixel);
    },
  };
}
