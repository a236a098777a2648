// Reads the splats enerf's page embeds (layout: enerf/splats/pagepack.py, whose decode_page_splats this
// mirrors) into the arrays createSplatRenderer draws: centres, the covariance as float16 pairs, colour and
// opacity bytes, band 1 as int8, in drawing order (largest opacity * volume first).
"use strict";
async function decodePageSplats(header, base64) {
  const bin = atob(base64);
  const zipped = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) zipped[i] = bin.charCodeAt(i);
  const stream = new Blob([zipped]).stream().pipeThrough(new DecompressionStream("gzip"));
  const raw = new Uint8Array(await new Response(stream).arrayBuffer());
  const n = header.count;
  const plane = (name, k) => raw.subarray(header.sections[name][0] + k * n, header.sections[name][0] + (k + 1) * n);
  const values = (q, lo, hi, bits) => lo + q / (2 ** bits - 1) * (hi - lo);

  // centres: the Morton codes' running sum (exact in a double up to 2^53), split into 3 integers
  const P = header.position, B = P.bits, codePlanes = Math.ceil(3 * B / 8);
  const compact = (v) => {  // every third bit of v (from bit 0), packed
    v &= 0x09249249; v = (v ^ (v >>> 2)) & 0x030c30c3; v = (v ^ (v >>> 4)) & 0x0300f00f;
    v = (v ^ (v >>> 8)) & 0xff0000ff; return (v ^ (v >>> 16)) & 0x3ff;
  };
  const rows = []; for (let b = 0; b < codePlanes; b++) rows.push(plane("code", b));
  const pos = new Float64Array(3 * n);
  let code = 0;
  for (let i = 0; i < n; i++) {
    let diff = 0;
    for (let b = codePlanes - 1; b >= 0; b--) diff = diff * 256 + rows[b][i];
    code += diff;
    const low = code % 1073741824, high = Math.floor(code / 1073741824);  // bits 0-29, 30-
    for (let a = 0; a < 3; a++) {
      const q = compact(low >>> a) + compact(high >>> a) * 1024;
      const x = P.lo[a] + q * P.step;
      pos[3 * i + a] = P.centre[a] + P.radius * Math.sign(x) * Math.expm1(Math.abs(x));
    }
  }
  // log scales, rotation ("smallest three"), colour and opacity levels
  const S = header.scale, logScale = new Float64Array(3 * n);
  for (let a = 0; a < 3; a++) {
    const q = plane("scales", a);
    for (let i = 0; i < n; i++) logScale[3 * i + a] = values(q[i], S.lo, S.hi, S.bits);
  }
  const quat = new Float64Array(4 * n), largest = plane("rotation", 0);
  const rest = [1, 2, 3].map((k) => plane("rotation", k));
  for (let i = 0; i < n; i++) {
    let k = 0, sum = 0;
    for (let c = 0; c < 4; c++) {
      if (c === largest[i]) continue;
      const v = values(rest[k++][i], -1, 1, header.rotation_bits) * Math.SQRT1_2;
      quat[4 * i + c] = v; sum += v * v;
    }
    quat[4 * i + largest[i]] = Math.sqrt(Math.max(0, 1 - sum));
  }
  const levels = [0, 1, 2, 3].map((c) => plane("rgba", c));
  const colorTop = 2 ** header.color_bits - 1, alphaTop = 2 ** header.alpha_bits - 1;
  const alpha = (i) => levels[3][i] / alphaTop;

  // drawing order: largest opacity * volume first (a stable sort, as numpy's)
  const importance = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    importance[i] = alpha(i) * Math.exp(logScale[3 * i] + logScale[3 * i + 1] + logScale[3 * i + 2]);
  }
  const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => importance[b] - importance[a]);

  // covariance R diag(s^2) R^T, each splat's six entries over its own power of two 2^covExp[i] (its largest
  // entry under 2^15) as float16 pairs (x, y | z, ...): a capture's covariances span more than float16's range
  const f32 = new Float32Array(1), u32 = new Uint32Array(f32.buffer);
  const half = (v) => {  // float -> IEEE float16 bits, rounded to nearest
    f32[0] = v;
    const x = u32[0], sign = (x >>> 16) & 0x8000, e = ((x >>> 23) & 0xff) - 112, m = x & 0x7fffff;
    if (e >= 31) return sign | 0x7c00;
    if (e <= 0) return e < -10 ? sign : sign | (((m | 0x800000) >>> (1 - e)) + 0x1000) >>> 13;
    return sign | (((e << 10) | (m >>> 13)) + ((m >>> 12) & 1));
  };
  const covBits = new Uint32Array(3 * n), covExp = new Int32Array(n), entries = new Float64Array(6);
  order.forEach((j, i) => {
    const [w, x, y, z] = quat.subarray(4 * j, 4 * j + 4);
    const R = [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
               2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
               2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)];
    const s2 = [0, 1, 2].map((a) => Math.exp(2 * logScale[3 * j + a]));
    const entry = (r, c) => R[3 * r] * R[3 * c] * s2[0] + R[3 * r + 1] * R[3 * c + 1] * s2[1]
                            + R[3 * r + 2] * R[3 * c + 2] * s2[2];
    let top = 0;
    [[0, 0], [0, 1], [0, 2], [1, 1], [1, 2], [2, 2]].forEach(([r, c], k) => {
      entries[k] = entry(r, c); top = Math.max(top, Math.abs(entries[k]));
    });
    covExp[i] = top > 0 ? Math.ceil(Math.log2(top)) - 15 : 0;
    const unit = 2 ** -covExp[i];
    for (let k = 0; k < 3; k++) {
      covBits[3 * i + k] = half(entries[2 * k] * unit) | (half(entries[2 * k + 1] * unit) << 16);
    }
  });

  const means = new Float32Array(3 * n), rgba = new Uint8Array(4 * n);
  const sh1 = header.sh_degree >= 1 ? new Int8Array(9 * n) : null;
  const book = sh1 ? new Int8Array(raw.buffer, raw.byteOffset + header.sections.sh1_codebook[0], 9 * header.sh1_codes)
                   : null;
  const index = sh1 ? plane("sh1", 0) : null;
  order.forEach((j, i) => {
    for (let a = 0; a < 3; a++) means[3 * i + a] = pos[3 * j + a];
    for (let c = 0; c < 3; c++) rgba[4 * i + c] = Math.round(levels[c][j] / colorTop * 255);
    rgba[4 * i + 3] = Math.round(alpha(j) * 255);
    if (sh1) sh1.set(book.subarray(9 * index[j], 9 * index[j] + 9), 9 * i);
  });
  return { n, means, cov: covBits, covExp, rgba, sh1, sh1Scale: header.sh1_scale,
           antialiased: !!header.antialiased };
}
