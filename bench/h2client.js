// bench/h2client.js - one HTTP/2 connection, N requests with C in flight
// (bench/h2). Through a CONNECT proxy (PROXY host:port) or straight to
// 127.0.0.1:PORT (PROXY "-"), TLS with ALPN h2, trusting CA.
//   node h2client.js PROXY HOST PORT CA AUTH N C
// Prints: requests=N seconds=S rps=R errors=E
'use strict';
const http2 = require('http2'), net = require('net'), tls = require('tls'), fs = require('fs');
const [proxy, host, port, caFile, auth, nStr, cStr] = process.argv.slice(2);
const ca = fs.readFileSync(caFile), n = +nStr, conc = +cStr;
function connect(cb) {
	const opts = { servername: host, ca, ALPNProtocols: ['h2'] };
	if (proxy === '-') {
		const s = tls.connect({ ...opts, host: '127.0.0.1', port: +port }, () => cb(s));
		return;
	}
	const [ph, pp] = proxy.split(':');
	const raw = net.connect(+pp, ph, () =>
		raw.write(`CONNECT ${host}:${port} HTTP/1.1\r\nHost: ${host}:${port}\r\n\r\n`));
	let buf = '';
	raw.on('data', function head(d) {
		buf += d;
		if (!buf.includes('\r\n\r\n')) return;
		raw.removeListener('data', head);
		if (!/^HTTP\/1\.1 200/.test(buf)) { console.log('tunnel refused: ' + buf); process.exit(1); }
		const s = tls.connect({ ...opts, socket: raw }, () => cb(s));
	});
}
connect((sock) => {
	if (sock.alpnProtocol !== 'h2') { console.log('not h2: ' + sock.alpnProtocol); process.exit(1); }
	const client = http2.connect(`https://${host}:${port}`, { createConnection: () => sock });
	let sent = 0, done = 0, errs = 0;
	const t0 = process.hrtime.bigint();
	function one() {
		if (sent >= n) return;
		sent++;
		const req = client.request({ ':path': '/r', authorization: auth });
		req.on('response', (h) => { if (h[':status'] !== 200) errs++; });
		req.on('data', () => {});
		const fin = () => {
			if (++done === n) {
				const s = Number(process.hrtime.bigint() - t0) / 1e9;
				console.log(`requests=${n} seconds=${s.toFixed(3)} rps=${(n / s).toFixed(0)} errors=${errs}`);
				client.close();
				sock.destroy();
			} else one();
		};
		req.on('end', fin);
		req.on('error', () => { errs++; fin(); });
		req.end();
	}
	for (let i = 0; i < conc; i++) one();
});
