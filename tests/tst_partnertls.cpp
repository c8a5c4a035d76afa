// Partners behind their own certificate authority, and partners that want a client
// certificate: real `once worker` processes against a real `once partner-sim` process
// serving HTTPS on loopback, with certificates made at test time by the openssl command
// (a private CA, server certificates for the right name, another name and an expired one,
// client certificates of that CA and of another). Effects are counted at the simulator
// (GET /stats over HTTPS), refusals read from `once dlq --json` and `once history --json`.
#include "deliveryharness.h"
#include "teststores.h"

#include <QDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QSslConfiguration>
#include <QSslKey>
#include <QSslSocket>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <memory>

using namespace oncetest;

namespace {

constexpr char CaConfig[] = R"([ca]
default_ca = test
[test]
dir = .
database = ./index.txt
new_certs_dir = ./issued
certificate = ./ca.pem
private_key = ./ca.key
serial = ./serial
default_md = sha256
policy = anything
unique_subject = no
[anything]
commonName = supplied
)";

} // namespace

class PartnerTlsTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void partnerCertificateIsCheckedAgainstTheNamedCa_data();
    void partnerCertificateIsCheckedAgainstTheNamedCa();
    void unusableTlsFilesAreRefusedAtStart_data();
    void unusableTlsFilesAreRefusedAtStart();

private:
    // Runs openssl with `args` in the certificates' folder; false (with a warning) if it failed.
    bool openssl(const QStringList &args);
    bool makeKeyAndRequest(const QString &name);
    bool signWith(const QString &ca, const QString &name, const QString &subjectAltName, const QString &use);
    QString cert(const QString &name) const { return m_certs.filePath(name); }
    // Starts `once partner-sim` over TLS; its port, or 0 (after a warning).
    quint16 startTlsPartner(const QStringList &tlsArgs);
    // GET /stats of the TLS partner, showing the client certificate (which a mutual-TLS
    // partner wants even for its statistics). The test's own look at a partner it started
    // on loopback: it accepts the expired and misnamed certificates the worker must not.
    QJsonObject partnerStats(quint16 port);

    QTemporaryDir m_certs;
    TestStores m_stores;
    QString m_onceBin;
    QString m_storeUrl;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<OnceRunner> m_once;
};

bool PartnerTlsTest::openssl(const QStringList &args)
{
    QProcess process;
    process.setWorkingDirectory(m_certs.path());
    process.start(QStringLiteral("openssl"), args);
    if (!process.waitForFinished(60000) || process.exitStatus() != QProcess::NormalExit || process.exitCode() != 0) {
        qWarning("openssl %s: %s", qPrintable(args.join(u' ')), process.readAllStandardError().constData());
        return false;
    }
    return true;
}

bool PartnerTlsTest::makeKeyAndRequest(const QString &name)
{
    return openssl({QStringLiteral("req"), QStringLiteral("-new"), QStringLiteral("-newkey"), QStringLiteral("ec"),
                    QStringLiteral("-pkeyopt"), QStringLiteral("ec_paramgen_curve:P-256"), QStringLiteral("-nodes"),
                    QStringLiteral("-keyout"), name + QStringLiteral(".key"), QStringLiteral("-out"),
                    name + QStringLiteral(".csr"), QStringLiteral("-subj"), QStringLiteral("/CN=") + name});
}

bool PartnerTlsTest::signWith(const QString &ca, const QString &name, const QString &subjectAltName, const QString &use)
{
    QFile extensions(cert(name + QStringLiteral(".ext")));
    if (!extensions.open(QIODevice::WriteOnly))
        return false;
    extensions.write("subjectAltName=" + subjectAltName.toLatin1() + "\nextendedKeyUsage=" + use.toLatin1() + "\n");
    extensions.close();
    return makeKeyAndRequest(name)
           && openssl({QStringLiteral("x509"), QStringLiteral("-req"), QStringLiteral("-in"), name + QStringLiteral(".csr"),
                       QStringLiteral("-CA"), ca + QStringLiteral(".pem"), QStringLiteral("-CAkey"), ca + QStringLiteral(".key"),
                       QStringLiteral("-CAcreateserial"), QStringLiteral("-days"), QStringLiteral("2"), QStringLiteral("-out"),
                       name + QStringLiteral(".pem"), QStringLiteral("-extfile"), name + QStringLiteral(".ext")});
}

void PartnerTlsTest::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(!m_onceBin.isEmpty(), "ONCE_BIN must name the built once binary (ctest sets it)");
    QVERIFY2(QSslSocket::supportsSsl(), "this Qt has no TLS backend");
    QVERIFY2(!QStandardPaths::findExecutable(QStringLiteral("openssl")).isEmpty(), "the openssl command is missing");
    QVERIFY(m_certs.isValid());

    // Two certificate authorities: the partner's private one, and another.
    for (const QString &ca : {QStringLiteral("ca"), QStringLiteral("otherca")}) {
        QVERIFY(openssl({QStringLiteral("req"), QStringLiteral("-x509"), QStringLiteral("-newkey"), QStringLiteral("ec"),
                         QStringLiteral("-pkeyopt"), QStringLiteral("ec_paramgen_curve:P-256"), QStringLiteral("-nodes"),
                         QStringLiteral("-keyout"), ca + QStringLiteral(".key"), QStringLiteral("-out"),
                         ca + QStringLiteral(".pem"), QStringLiteral("-days"), QStringLiteral("2"), QStringLiteral("-subj"),
                         QStringLiteral("/CN=once test ") + ca, QStringLiteral("-addext"),
                         QStringLiteral("basicConstraints=critical,CA:TRUE"), QStringLiteral("-addext"),
                         QStringLiteral("keyUsage=critical,keyCertSign,cRLSign")}));
    }
    const QString loopback = QStringLiteral("DNS:localhost,IP:127.0.0.1");
    QVERIFY(signWith(QStringLiteral("ca"), QStringLiteral("server"), loopback, QStringLiteral("serverAuth")));
    QVERIFY(signWith(QStringLiteral("ca"), QStringLiteral("othername"), QStringLiteral("DNS:partner.example"),
                     QStringLiteral("serverAuth")));
    QVERIFY(signWith(QStringLiteral("ca"), QStringLiteral("client"), QStringLiteral("DNS:once-worker"),
                     QStringLiteral("clientAuth")));
    QVERIFY(signWith(QStringLiteral("otherca"), QStringLiteral("strangerclient"), QStringLiteral("DNS:once-worker"),
                     QStringLiteral("clientAuth")));
    // Expired: valid for one day in 2020, which only `openssl ca` can write.
    QVERIFY(QDir(m_certs.path()).mkpath(QStringLiteral("issued")));
    QFile config(cert(QStringLiteral("ca.cnf")));
    QVERIFY(config.open(QIODevice::WriteOnly));
    config.write(CaConfig);
    config.close();
    QFile index(cert(QStringLiteral("index.txt")));
    QVERIFY(index.open(QIODevice::WriteOnly));
    index.close();
    QFile serial(cert(QStringLiteral("serial")));
    QVERIFY(serial.open(QIODevice::WriteOnly));
    serial.write("1000\n");
    serial.close();
    QFile extensions(cert(QStringLiteral("expired.ext")));
    QVERIFY(extensions.open(QIODevice::WriteOnly));
    extensions.write("subjectAltName=" + loopback.toLatin1() + "\nextendedKeyUsage=serverAuth\n");
    extensions.close();
    QVERIFY(makeKeyAndRequest(QStringLiteral("expired")));
    QVERIFY(openssl({QStringLiteral("ca"), QStringLiteral("-batch"), QStringLiteral("-config"), QStringLiteral("ca.cnf"),
                     QStringLiteral("-notext"), QStringLiteral("-startdate"), QStringLiteral("20200101000000Z"),
                     QStringLiteral("-enddate"), QStringLiteral("20200102000000Z"), QStringLiteral("-in"),
                     QStringLiteral("expired.csr"), QStringLiteral("-out"), QStringLiteral("expired.pem"),
                     QStringLiteral("-extfile"), QStringLiteral("expired.ext")}));
    const auto expired = QSslCertificate::fromPath(cert(QStringLiteral("expired.pem")));
    QCOMPARE(expired.size(), 1);
    QVERIFY(expired.first().expiryDate() < QDateTime::currentDateTimeUtc());
    // A key only a passphrase opens.
    QVERIFY(openssl({QStringLiteral("ec"), QStringLiteral("-in"), QStringLiteral("client.key"), QStringLiteral("-aes256"),
                     QStringLiteral("-passout"), QStringLiteral("pass:secret"), QStringLiteral("-out"),
                     QStringLiteral("encrypted.key")}));
}

void PartnerTlsTest::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_storeUrl = m_stores.newUrl();
    m_once = std::make_unique<OnceRunner>(m_onceBin, m_storeUrl);
    const auto init = m_once->run({QStringLiteral("init")});
    QVERIFY2(init.exitedWith(0), init.describe().constData());
}

void PartnerTlsTest::cleanup()
{
    m_once.reset(); // kills the simulator and whatever else still runs
    m_dir.reset();
}

quint16 PartnerTlsTest::startTlsPartner(const QStringList &tlsArgs)
{
    QProcess *partner = m_once->start(QStringList{QStringLiteral("partner-sim"), QStringLiteral("--port"), QStringLiteral("0")}
                                      + tlsArgs);
    QByteArray banner;
    pumpUntil(
        [&] {
            if (partner->canReadLine())
                banner = partner->readLine();
            return !banner.isEmpty() || partner->state() == QProcess::NotRunning;
        },
        CommandTimeoutMs);
    // "partner simulator listening on https://127.0.0.1:PORT/reminders"
    const qsizetype at = banner.indexOf("https://127.0.0.1:");
    const quint16 port = at < 0 ? 0 : quint16(banner.mid(at + 18).split('/').value(0).toUInt());
    if (!port)
        qWarning("the TLS partner did not start: %s %s", banner.constData(), partner->readAllStandardError().constData());
    return port;
}

QJsonObject PartnerTlsTest::partnerStats(quint16 port)
{
    QSslSocket socket;
    QSslConfiguration configuration = QSslConfiguration::defaultConfiguration();
    configuration.setPeerVerifyMode(QSslSocket::VerifyNone);
    configuration.setLocalCertificateChain(QSslCertificate::fromPath(cert(QStringLiteral("client.pem"))));
    QFile keyFile(cert(QStringLiteral("client.key")));
    if (!keyFile.open(QIODevice::ReadOnly))
        return {};
    configuration.setPrivateKey(QSslKey(keyFile.readAll(), QSsl::Ec));
    socket.setSslConfiguration(configuration);
    socket.connectToHostEncrypted(QStringLiteral("localhost"), port);
    if (!socket.waitForEncrypted(10000)) {
        qWarning("GET /stats: %s", qPrintable(socket.errorString()));
        return {};
    }
    socket.write("GET /stats HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    QByteArray answer;
    while (socket.waitForReadyRead(10000))
        answer += socket.readAll();
    answer += socket.readAll();
    return QJsonDocument::fromJson(answer.mid(answer.indexOf("\r\n\r\n") + 4)).object();
}

void PartnerTlsTest::partnerCertificateIsCheckedAgainstTheNamedCa_data()
{
    QTest::addColumn<QString>("serverCert");
    QTest::addColumn<bool>("mutual");
    QTest::addColumn<QStringList>("workerArgs");
    QTest::addColumn<QStringList>("workerEnv"); // NAME=FILE pairs
    QTest::addColumn<QString>("refusal");       // empty: the send is applied

    const QStringList noEnv;
    const QString ca = QStringLiteral("ca.pem");
    const QStringList namedCa{QStringLiteral("--partner-ca"), ca};
    const QStringList clientCert{QStringLiteral("--partner-cert"), QStringLiteral("client.pem"),
                                 QStringLiteral("--partner-key"), QStringLiteral("client.key")};
    QTest::newRow("private CA named with --partner-ca") << QStringLiteral("server") << false << namedCa << noEnv << QString();
    QTest::newRow("private CA named with ONCE_PARTNER_CA")
        << QStringLiteral("server") << false << QStringList() << QStringList{QStringLiteral("ONCE_PARTNER_CA=ca.pem")}
        << QString();
    QTest::newRow("private CA not named: the system's CAs refuse it")
        << QStringLiteral("server") << false << QStringList() << noEnv << QStringLiteral("issuer certificate");
    QTest::newRow("a certificate for another name")
        << QStringLiteral("othername") << false << namedCa << noEnv
        << QStringLiteral("host name did not match any of the valid hosts for this certificate");
    QTest::newRow("an expired certificate")
        << QStringLiteral("expired") << false << namedCa << noEnv << QStringLiteral("The certificate has expired");
    QTest::newRow("mutual TLS with the client certificate")
        << QStringLiteral("server") << true << namedCa + clientCert << noEnv << QString();
    QTest::newRow("mutual TLS with the client certificate from the environment")
        << QStringLiteral("server") << true << namedCa << QStringList{QStringLiteral("ONCE_PARTNER_CERT=client.pem"),
                                                                     QStringLiteral("ONCE_PARTNER_KEY=client.key")}
        << QString();
    QTest::newRow("mutual TLS without a client certificate")
        << QStringLiteral("server") << true << namedCa << noEnv << QStringLiteral("a client certificate is required");
    QTest::newRow("mutual TLS with a client certificate of another CA")
        << QStringLiteral("server") << true
        << namedCa + QStringList{QStringLiteral("--partner-cert"), QStringLiteral("strangerclient.pem"),
                                 QStringLiteral("--partner-key"), QStringLiteral("strangerclient.key")}
        << noEnv << QStringLiteral("the partner refused it");
}

void PartnerTlsTest::partnerCertificateIsCheckedAgainstTheNamedCa()
{
    QFETCH(QString, serverCert);
    QFETCH(bool, mutual);
    QFETCH(QStringList, workerArgs);
    QFETCH(QStringList, workerEnv);
    QFETCH(QString, refusal);
    const auto keys = m_once->enqueueReminders(m_dir->path(), 1, QStringLiteral("tls"));
    QCOMPARE(keys.size(), 1);
    QStringList tlsArgs{QStringLiteral("--tls-cert"), cert(serverCert + QStringLiteral(".pem")),
                        QStringLiteral("--tls-key"), cert(serverCert + QStringLiteral(".key"))};
    if (mutual)
        tlsArgs << QStringLiteral("--tls-client-ca") << cert(QStringLiteral("ca.pem"));
    const quint16 port = startTlsPartner(tlsArgs);
    QVERIFY(port);

    for (QString &arg : workerArgs) {
        if (arg.endsWith(QLatin1String(".pem")) || arg.endsWith(QLatin1String(".key")))
            arg = cert(arg);
    }
    QMap<QString, QString> env;
    for (const QString &pair : std::as_const(workerEnv))
        env.insert(pair.section(u'=', 0, 0), cert(pair.section(u'=', 1)));
    // One attempt: a refusal is a dead letter at once, with its reason.
    const QStringList args = QStringList{QStringLiteral("worker"), QStringLiteral("--partner"),
                                         QStringLiteral("https://127.0.0.1:%1/reminders").arg(port),
                                         QStringLiteral("--until-idle"), QStringLiteral("--max-attempts"),
                                         QStringLiteral("1"), QStringLiteral("--timeout"), QStringLiteral("5")}
                             + workerArgs;
    const auto worker = m_once->run(args, env, WorkerTimeoutMs);
    QVERIFY2(worker.exitedWith(0), worker.describe().constData());

    const QJsonObject stats = partnerStats(port);
    QVERIFY2(stats.contains(QLatin1String("effects")), "no statistics from the TLS partner");
    const QJsonArray dead = m_once->jsonArray({QStringLiteral("dlq"), QStringLiteral("--json")});
    if (refusal.isEmpty()) {
        QCOMPARE(stats.value(QLatin1String("effects")).toInteger(), 1);
        QCOMPARE(dead.size(), 0);
        VERIFY_NO_PROBLEMS(statsProblems(m_once->stats(), {{QStringLiteral("acked"), 1}, {QStringLiteral("dead"), 0}}));
        return;
    }
    // Refused before anything reached the partner's server: no request, no effect, and
    // one line that says why, as a connection failure (never "in doubt").
    QCOMPARE(stats.value(QLatin1String("requests")).toInteger(), 0);
    QCOMPARE(stats.value(QLatin1String("effects")).toInteger(), 0);
    QCOMPARE(dead.size(), 1);
    const QJsonObject letter = dead.first().toObject();
    QCOMPARE(letter.value(QLatin1String("error_class")).toString(), QStringLiteral("connect-failed"));
    const QString error = letter.value(QLatin1String("last_error")).toString();
    QVERIFY2(error.contains(QLatin1String("TLS handshake with 127.0.0.1:")) && error.contains(refusal), qPrintable(error));
    QVERIFY2(!error.contains(u'\n'), qPrintable(error));
    const auto history = m_once->run({QStringLiteral("history"), QString::fromLatin1(keys.first()), QStringLiteral("--json")});
    const QJsonObject story = QJsonDocument::fromJson(history.out).object();
    QVERIFY2(story.value(QLatin1String("last_error")).toString().contains(refusal), history.out.constData());
}

void PartnerTlsTest::unusableTlsFilesAreRefusedAtStart_data()
{
    QTest::addColumn<QStringList>("workerArgs");
    QTest::addColumn<QString>("says");

    const QString https = QStringLiteral("https://127.0.0.1:9/reminders");
    QTest::newRow("missing CA file") << QStringList{https, QStringLiteral("--partner-ca"), QStringLiteral("nosuch.pem")}
                                     << QStringLiteral("partner CA: cannot read");
    QTest::newRow("CA file that is a key") << QStringList{https, QStringLiteral("--partner-ca"), QStringLiteral("client.key")}
                                           << QStringLiteral("holds no PEM certificate");
    QTest::newRow("certificate without its key")
        << QStringList{https, QStringLiteral("--partner-cert"), QStringLiteral("client.pem")}
        << QStringLiteral("needs its key");
    QTest::newRow("key without its certificate")
        << QStringList{https, QStringLiteral("--partner-key"), QStringLiteral("client.key")}
        << QStringLiteral("needs its key");
    QTest::newRow("key file that is a certificate")
        << QStringList{https, QStringLiteral("--partner-cert"), QStringLiteral("client.pem"), QStringLiteral("--partner-key"),
                       QStringLiteral("client.pem")}
        << QStringLiteral("holds no PEM private key");
    QTest::newRow("encrypted key")
        << QStringList{https, QStringLiteral("--partner-cert"), QStringLiteral("client.pem"), QStringLiteral("--partner-key"),
                       QStringLiteral("encrypted.key")}
        << QStringLiteral("encrypted private key");
    QTest::newRow("a CA for a partner without TLS")
        << QStringList{QStringLiteral("http://127.0.0.1:9/reminders"), QStringLiteral("--partner-ca"), QStringLiteral("ca.pem")}
        << QStringLiteral("https://");
}

// A file that cannot be used is one line at start (exit 2), before anything is claimed,
// and never shows what a key file holds.
void PartnerTlsTest::unusableTlsFilesAreRefusedAtStart()
{
    QFETCH(QStringList, workerArgs);
    QFETCH(QString, says);
    const auto keys = m_once->enqueueReminders(m_dir->path(), 1, QStringLiteral("files"));
    QCOMPARE(keys.size(), 1);
    for (QString &arg : workerArgs) {
        if (arg.endsWith(QLatin1String(".pem")) || arg.endsWith(QLatin1String(".key")))
            arg = cert(arg);
    }
    const auto worker = m_once->run(QStringList{QStringLiteral("worker"), QStringLiteral("--until-idle"),
                                                QStringLiteral("--partner")}
                                    + workerArgs);
    QVERIFY2(worker.exitedWith(2), worker.describe().constData());
    const QByteArray err = worker.err.trimmed();
    QVERIFY2(!err.contains('\n') && err.contains(says.toUtf8()), err.constData());
    for (const QString &keyFile : {QStringLiteral("client.key"), QStringLiteral("encrypted.key")}) {
        QFile file(cert(keyFile));
        QVERIFY(file.open(QIODevice::ReadOnly));
        // The body of the key, line by line: none of it may be printed.
        for (const QByteArray &line : file.readAll().split('\n')) {
            if (line.size() > 16 && !line.startsWith("-----"))
                QVERIFY2(!worker.err.contains(line) && !worker.out.contains(line), "a key file's content was printed");
        }
    }
    VERIFY_NO_PROBLEMS(statsProblems(m_once->stats(), {{QStringLiteral("ready"), 1}, {QStringLiteral("claimed"), 0}}));
}

QTEST_GUILESS_MAIN(PartnerTlsTest)

#include "tst_partnertls.moc"
