// A small QR code encoder (ISO/IEC 18004:2015) for the pairing link: byte
// mode, error-correction level M, versions 1–10 (up to 213 bytes; the pairing
// URL is ~110). Written for the dashboard because the pages may not fetch
// anything outside the stack (no CDN), and they have no build step.
//
// Steps, each after the standard's section:
//   §7.4  data: mode 0100, 8/16-bit count, bytes, terminator, pad 0xEC 0x11;
//   §7.5  Reed–Solomon over GF(256) (x^8+x^4+x^3+x^2+1), blocks per Table 9;
//   §7.6  interleave data then EC codewords across blocks;
//   §7.7  function patterns (finders, separators, timing, alignment, dark module);
//   §7.7.3 data placement in two-module columns, zig-zag from bottom right;
//   §7.8  the mask with the lowest penalty (N1..N4);
//   §7.9  format information BCH(15,5) ⊕ 0x5412; §7.10 version BCH(18,6) for v ≥ 7.

// Level M, per version: [EC codewords per block, [blocks, data codewords]…] (Table 9).
const BLOCKS_M = [
  null,
  [10, [1, 16]], [16, [1, 28]], [26, [1, 44]], [18, [2, 32]], [24, [2, 43]],
  [16, [4, 27]], [18, [4, 31]], [22, [2, 38], [2, 39]], [22, [3, 36], [2, 37]], [26, [4, 43], [1, 44]],
];
// Centre coordinates of alignment patterns (Annex E).
const ALIGN = [null, [], [6, 18], [6, 22], [6, 26], [6, 30], [6, 34],
  [6, 22, 38], [6, 24, 42], [6, 26, 46], [6, 28, 50]];
const FORMAT_M = 0b00; // error-correction level M (Table 12)

// ---- GF(256) and Reed–Solomon ------------------------------------------------

const EXP = new Uint8Array(512);
const LOG = new Uint8Array(256);
(() => {
  let x = 1;
  for (let i = 0; i < 255; i++) {
    EXP[i] = x;
    LOG[x] = i;
    x <<= 1;
    if (x & 0x100) x ^= 0x11d;
  }
  for (let i = 255; i < 512; i++) EXP[i] = EXP[i - 255];
})();

function gfMul(a, b) {
  return a && b ? EXP[LOG[a] + LOG[b]] : 0;
}

/** Generator polynomial ∏(x − α^i), i < degree; coefficients high to low, leading 1 dropped. */
function rsGenerator(degree) {
  let poly = [1];
  for (let i = 0; i < degree; i++) {
    const next = new Array(poly.length + 1).fill(0);
    for (let j = 0; j < poly.length; j++) {
      next[j] ^= poly[j];
      next[j + 1] ^= gfMul(poly[j], EXP[i]);
    }
    poly = next;
  }
  return poly.slice(1);
}

/** The EC codewords of one block: the remainder of data·x^n divided by the generator. */
export function rsRemainder(data, degree) {
  const gen = rsGenerator(degree);
  const rem = new Array(degree).fill(0);
  for (const byte of data) {
    const factor = byte ^ rem.shift();
    rem.push(0);
    for (let i = 0; i < degree; i++) rem[i] ^= gfMul(gen[i], factor);
  }
  return rem;
}

// ---- codewords ---------------------------------------------------------------

function dataCapacity(version) {
  const [, ...groups] = BLOCKS_M[version];
  return groups.reduce((n, [blocks, words]) => n + blocks * words, 0);
}

function chooseVersion(byteLength) {
  for (let v = 1; v < BLOCKS_M.length; v++) {
    const countBits = v <= 9 ? 8 : 16;
    if (4 + countBits + 8 * byteLength <= dataCapacity(v) * 8) return v;
  }
  throw new Error(`QR: ${byteLength} bytes do not fit version 10-M`);
}

/** Data codewords then interleaved EC codewords, for text in byte mode. */
export function encodeCodewords(bytes, version) {
  const capacity = dataCapacity(version);
  const bits = [];
  const put = (value, n) => { for (let i = n - 1; i >= 0; i--) bits.push((value >>> i) & 1); };
  put(0b0100, 4);
  put(bytes.length, version <= 9 ? 8 : 16);
  for (const b of bytes) put(b, 8);
  put(0, Math.min(4, capacity * 8 - bits.length)); // terminator
  while (bits.length % 8) bits.push(0);
  const data = [];
  for (let i = 0; i < bits.length; i += 8) data.push(bits.slice(i, i + 8).reduce((a, b) => (a << 1) | b, 0));
  for (let pad = 0xec; data.length < capacity; pad ^= 0xec ^ 0x11) data.push(pad);

  const [ecLen, ...groups] = BLOCKS_M[version];
  const blocks = [];
  let at = 0;
  for (const [count, words] of groups) {
    for (let b = 0; b < count; b++) {
      const d = data.slice(at, at + words);
      at += words;
      blocks.push({ data: d, ec: rsRemainder(d, ecLen) });
    }
  }
  const out = [];
  const longest = Math.max(...blocks.map((b) => b.data.length));
  for (let i = 0; i < longest; i++) for (const b of blocks) if (i < b.data.length) out.push(b.data[i]);
  for (let i = 0; i < ecLen; i++) for (const b of blocks) out.push(b.ec[i]);
  return out;
}

// ---- the matrix ----------------------------------------------------------------

class Matrix {
  constructor(version) {
    this.version = version;
    this.size = 17 + 4 * version;
    this.dark = Array.from({ length: this.size }, () => new Uint8Array(this.size));
    this.fixed = Array.from({ length: this.size }, () => new Uint8Array(this.size));
  }

  set(row, col, dark) {
    this.dark[row][col] = dark ? 1 : 0;
    this.fixed[row][col] = 1;
  }

  drawFunctionPatterns() {
    const n = this.size;
    for (let i = 0; i < n; i++) { // timing (§7.7.4)
      this.set(6, i, i % 2 === 0);
      this.set(i, 6, i % 2 === 0);
    }
    for (const [r, c] of [[3, 3], [3, n - 4], [n - 4, 3]]) { // finders + separators (§7.7.2)
      for (let dr = -4; dr <= 4; dr++) {
        for (let dc = -4; dc <= 4; dc++) {
          const rr = r + dr, cc = c + dc;
          if (rr < 0 || cc < 0 || rr >= n || cc >= n) continue;
          const d = Math.max(Math.abs(dr), Math.abs(dc));
          this.set(rr, cc, d !== 2 && d !== 4);
        }
      }
    }
    const pos = ALIGN[this.version]; // alignment (§7.7.5), not over the finders
    for (const r of pos) {
      for (const c of pos) {
        if ((r === 6 && c === 6) || (r === 6 && c === pos[pos.length - 1]) || (r === pos[pos.length - 1] && c === 6)) continue;
        for (let dr = -2; dr <= 2; dr++) {
          for (let dc = -2; dc <= 2; dc++) this.set(r + dr, c + dc, Math.max(Math.abs(dr), Math.abs(dc)) !== 1);
        }
      }
    }
    this.drawFormat(0); // reserve; redrawn with the chosen mask
    if (this.version >= 7) this.drawVersion();
  }

  /** Format information (§7.9): EC level and mask, BCH(15,5), XOR 0x5412, two copies. */
  drawFormat(mask) {
    const n = this.size;
    const data = (FORMAT_M << 3) | mask;
    let rem = data;
    for (let i = 0; i < 10; i++) rem = (rem << 1) ^ ((rem >>> 9) * 0x537);
    const bits = ((data << 10) | rem) ^ 0x5412;
    const bit = (i) => ((bits >>> i) & 1) === 1;
    // Around the top-left finder.
    for (let i = 0; i <= 5; i++) this.set(i, 8, bit(i));
    this.set(7, 8, bit(6));
    this.set(8, 8, bit(7));
    this.set(8, 7, bit(8));
    for (let i = 9; i < 15; i++) this.set(8, 14 - i, bit(i));
    // Split between the other two finders.
    for (let i = 0; i < 8; i++) this.set(8, n - 1 - i, bit(i));
    for (let i = 8; i < 15; i++) this.set(n - 15 + i, 8, bit(i));
    this.set(n - 8, 8, true); // the dark module (§7.9.1)
  }

  /** Version information (§7.10): 6 bits + BCH(18,6), beside two finders. */
  drawVersion() {
    const n = this.size;
    let rem = this.version;
    for (let i = 0; i < 12; i++) rem = (rem << 1) ^ ((rem >>> 11) * 0x1f25);
    const bits = (this.version << 12) | rem;
    for (let i = 0; i < 18; i++) {
      const dark = ((bits >>> i) & 1) === 1;
      const a = n - 11 + (i % 3), b = Math.floor(i / 3);
      this.set(b, a, dark);
      this.set(a, b, dark);
    }
  }

  /** Codeword bits into the free modules, two-column zig-zag from the bottom right (§7.7.3). */
  placeData(codewords) {
    const n = this.size;
    let i = 0;
    const total = codewords.length * 8;
    for (let right = n - 1; right >= 1; right -= 2) {
      if (right === 6) right = 5; // skip the vertical timing column
      const upward = ((right + 1) & 2) === 0;
      for (let k = 0; k < n; k++) {
        const row = upward ? n - 1 - k : k;
        for (let j = 0; j < 2; j++) {
          const col = right - j;
          if (this.fixed[row][col]) continue;
          // Remainder bits after the last codeword stay light (§7.7.3).
          this.dark[row][col] = i < total ? (codewords[i >>> 3] >>> (7 - (i & 7))) & 1 : 0;
          i++;
        }
      }
    }
  }

  applyMask(mask) {
    const cond = MASKS[mask];
    for (let r = 0; r < this.size; r++) {
      for (let c = 0; c < this.size; c++) if (!this.fixed[r][c] && cond(r, c)) this.dark[r][c] ^= 1;
    }
  }

  /** Penalty score of §7.8.3 (N1 = 3, N2 = 3, N3 = 40, N4 = 10). */
  penalty() {
    const n = this.size, m = this.dark;
    let score = 0;
    const lines = [];
    for (let r = 0; r < n; r++) lines.push(Array.from(m[r]));
    for (let c = 0; c < n; c++) lines.push(Array.from({ length: n }, (_, r) => m[r][c]));
    const finderLike = [1, 0, 1, 1, 1, 0, 1];
    for (const line of lines) {
      let run = 1;
      for (let i = 1; i <= n; i++) {
        if (i < n && line[i] === line[i - 1]) { run++; continue; }
        if (run >= 5) score += 3 + (run - 5);
        run = 1;
      }
      // 1:1:3:1:1 with four light modules on one side (outside the symbol counts as light).
      const at = (i) => (i < 0 || i >= n ? 0 : line[i]);
      for (let i = 0; i + 7 <= n; i++) {
        if (!finderLike.every((v, k) => line[i + k] === v)) continue;
        const before = [1, 2, 3, 4].every((k) => at(i - k) === 0);
        const after = [0, 1, 2, 3].every((k) => at(i + 7 + k) === 0);
        if (before || after) score += 40;
      }
    }
    let dark = 0;
    for (let r = 0; r < n; r++) {
      for (let c = 0; c < n; c++) {
        dark += m[r][c];
        if (r + 1 < n && c + 1 < n && m[r][c] === m[r][c + 1] && m[r][c] === m[r + 1][c] && m[r][c] === m[r + 1][c + 1]) score += 3;
      }
    }
    score += Math.floor(Math.abs((dark * 100) / (n * n) - 50) / 5) * 10;
    return score;
  }
}

// Data mask conditions (Table 10): i = row, j = column.
const MASKS = [
  (i, j) => (i + j) % 2 === 0,
  (i) => i % 2 === 0,
  (_i, j) => j % 3 === 0,
  (i, j) => (i + j) % 3 === 0,
  (i, j) => (Math.floor(i / 2) + Math.floor(j / 3)) % 2 === 0,
  (i, j) => ((i * j) % 2) + ((i * j) % 3) === 0,
  (i, j) => (((i * j) % 2) + ((i * j) % 3)) % 2 === 0,
  (i, j) => (((i + j) % 2) + ((i * j) % 3)) % 2 === 0,
];

/** The QR symbol of `text`: {version, size, mask, modules: rows of 0/1}. */
export function encodeQr(text, forcedMask = null) {
  const bytes = Array.from(new TextEncoder().encode(text));
  const version = chooseVersion(bytes.length);
  const codewords = encodeCodewords(bytes, version);
  let best = null;
  for (let mask = 0; mask < 8; mask++) {
    if (forcedMask !== null && mask !== forcedMask) continue;
    const m = new Matrix(version);
    m.drawFunctionPatterns();
    m.placeData(codewords);
    m.applyMask(mask);
    m.drawFormat(mask);
    const score = m.penalty();
    if (!best || score < best.score) best = { score, mask, m };
  }
  return { version, size: best.m.size, mask: best.mask, modules: best.m.dark.map((row) => Array.from(row)) };
}

/** Draws the symbol into `container` as a canvas, with the 4-module quiet zone. */
export function renderQr(container, text, scale = 5) {
  container.textContent = "";
  container.dataset.url = text;
  let qr;
  try {
    qr = encodeQr(text);
  } catch (e) {
    container.hidden = true; // too long for this encoder: the link is shown as text anyway
    console.error(e.message);
    return null;
  }
  const quiet = 4;
  const px = (qr.size + 2 * quiet) * scale;
  const canvas = document.createElement("canvas");
  canvas.width = canvas.height = px;
  canvas.dataset.testid = "qr-canvas";
  canvas.dataset.version = String(qr.version);
  const g = canvas.getContext("2d");
  g.fillStyle = "#fff";
  g.fillRect(0, 0, px, px);
  g.fillStyle = "#000";
  for (let r = 0; r < qr.size; r++) {
    for (let c = 0; c < qr.size; c++) {
      if (qr.modules[r][c]) g.fillRect((c + quiet) * scale, (r + quiet) * scale, scale, scale);
    }
  }
  container.append(canvas);
  container.hidden = false;
  return qr;
}
