// The crash suite through every HTTP profile: `once worker --partners FILE` sending to
// `once partner-sim --profile NAME`, killed with SIGKILL right after the partner accepted
// and before the worker recorded it (the after-send failpoint) and at a random moment,
// while the partner drops some answers after acting; then a worker runs until idle, and
// `once reconcile` asks the partners that have a lookup. Effects are counted at the
// simulator, per key, never taken from the worker's word.
//
// What each profile must come to:
// - webhook, resend (the partner deduplicates by our key): every key in doubt is resent
//   with the same key, the partner replays, and every reminder has exactly one effect.
// - postmark, sendgrid, twilio, slack (no idempotency): a key in doubt is held, never
//   resent, so no reminder has two effects. Where the partner has a lookup (postmark,
//   sendgrid's Email Activity, a webhook's "lookup"), once reconcile settles every held
//   key the partner has as applied, with its message id; what is left in doubt never
//   reached the partner, and an operator's resend of it makes its one effect.
//
// A random moment comes from a seed printed at the start (ONCE_TEST_SEED repeats it).
#include "deliveryharness.h"
#include "model/reminder.h"
#include "partners/partnerprofile.h"
#include "teststores.h"

#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRandomGenerator>
#include <QRegularExpression>
#include <QSet>
#include <QTemporaryDir>
#include <QTest>

#include <csignal>

using namespace once;
using namespace oncetest;

namespace {

constexpr int Count = 12;
const QString SimToken = QStringLiteral("sim-S3CRET-token");
const QString SlackSecret = QStringLiteral("hookS3CRETpath77");

struct Sent
{
    QByteArray key;       // the send key, as the ledger has it
    QByteArray effectKey; // what the simulator counts its effect by
};

bool keysHeld(const QString &profile)
{
    return profile != QLatin1String("webhook") && profile != QLatin1String("resend");
}

bool hasLookup(const QString &profile)
{
    return profile == QLatin1String("webhook") || profile == QLatin1String("postmark")
           || profile == QLatin1String("sendgrid");
}

} // namespace

class ProfileCrashTest final : public QObject
{
    Q_OBJECT

private slots:
    void initTestCase();
    void init();
    void cleanup();

    void crashesTakeEffectOnceThroughEveryProfile_data();
    void crashesTakeEffectOnceThroughEveryProfile();
    void aKeyInDoubtLongerThanResendKeepsItIsHeld();
    void aKeyRetryingAfterASendInDoubtForADayIsHeld();

private:
    QString writeFile(const QString &name, const QByteArray &content) const;
    QString partnersFile(const QString &profile, quint16 port) const;
    // Writes `count` reminders for the profile and enqueues them.
    QList<Sent> enqueue(const QString &profile, int count = Count);
    QHash<QByteArray, int> effectsAt(quint16 port);
    QJsonObject statsAt(quint16 port);
    // The ledger's state and provider id of every key.
    QHash<QByteArray, QPair<QString, QString>> ledger();
    QStringList workerArgs(const QString &partners) const;
    // Moves the matching ledger rows a day and an hour back (their first claim, last claim
    // and first send), as if their workers had stopped a day ago. Empty when it did.
    QString ageLedger(const QString &where, int expectedRows);

    TestStores m_stores;
    QString m_onceBin;
    std::unique_ptr<QTemporaryDir> m_dir;
    std::unique_ptr<OnceRunner> m_once;
    QRandomGenerator m_random;
    const QMap<QString, QString> m_env{{QStringLiteral("SIM_TOKEN"), SimToken}};
};

void ProfileCrashTest::initTestCase()
{
    m_onceBin = qEnvironmentVariable("ONCE_BIN");
    QVERIFY2(QFile::exists(m_onceBin), "ONCE_BIN must name the built once binary (ctest sets it)");
    const quint32 seed = qEnvironmentVariableIsSet("ONCE_TEST_SEED") ? quint32(qEnvironmentVariableIntValue("ONCE_TEST_SEED"))
                                                                     : QRandomGenerator::global()->generate();
    m_random.seed(seed);
    qInfo("seed %u (ONCE_TEST_SEED=%u repeats the random kills)", seed, seed);
}

void ProfileCrashTest::init()
{
    m_dir = std::make_unique<QTemporaryDir>();
    QVERIFY(m_dir->isValid());
    m_once = std::make_unique<OnceRunner>(m_onceBin, m_stores.newUrl());
    const auto init = m_once->run({QStringLiteral("init"), QStringLiteral("--lease"), QStringLiteral("2"),
                                   QStringLiteral("--max-attempts"), QStringLiteral("20")});
    QVERIFY2(init.exitedWith(0), init.describe().constData());
}

void ProfileCrashTest::cleanup()
{
    m_once.reset();
    if (QTest::currentTestFailed())
        m_dir->setAutoRemove(false);
    m_dir.reset();
}

QString ProfileCrashTest::writeFile(const QString &name, const QByteArray &content) const
{
    const QString path = m_dir->filePath(name);
    QFile file(path);
    if (!file.open(QIODevice::WriteOnly | QIODevice::Truncate) || file.write(content) != content.size())
        qWarning("cannot write %s", qPrintable(path));
    return path;
}

QString ProfileCrashTest::partnersFile(const QString &profile, quint16 port) const
{
    const QString base = QStringLiteral("http://127.0.0.1:%1").arg(port);
    QJsonObject partner{{QStringLiteral("profile"), profile}, {QStringLiteral("url"), base},
                        {QStringLiteral("token"), QStringLiteral("env:SIM_TOKEN")}};
    if (profile == QLatin1String("webhook")) {
        partner.insert(QStringLiteral("url"), QString(base + QStringLiteral("/reminders")));
        partner.insert(QStringLiteral("lookup"), QString(base + QStringLiteral("/reminders/{key}")));
    } else if (profile == QLatin1String("twilio")) {
        partner.insert(QStringLiteral("account"), QStringLiteral("AC0123456789abcdef0123456789abcdef"));
        partner.insert(QStringLiteral("from"), QStringLiteral("+15550001111"));
    } else if (profile == QLatin1String("slack")) {
        partner.remove(QStringLiteral("token"));
        partner.insert(QStringLiteral("url"), QString(base + QStringLiteral("/services/T0SIM/B0SIM/") + SlackSecret));
    } else {
        partner.insert(QStringLiteral("from"), QStringLiteral("reminders@example.test"));
        partner.insert(QStringLiteral("subject"), QStringLiteral("Your reminder"));
    }
    if (profile == QLatin1String("sendgrid"))
        partner.insert(QStringLiteral("activity_api"), true);
    const QJsonObject file{{QStringLiteral("partners"), QJsonObject{{profile, partner}}}};
    return writeFile(QStringLiteral("partners-%1.json").arg(profile), QJsonDocument(file).toJson());
}

QList<Sent> ProfileCrashTest::enqueue(const QString &profile, int count)
{
    QByteArray lines;
    QList<Sent> sent;
    for (int i = 0; i < count; ++i) {
        const QString user = QStringLiteral("%1-user-%2").arg(profile).arg(i);
        const QString reminder = QStringLiteral("%1-rem-%2").arg(profile).arg(i);
        const QString at = QStringLiteral("2026-12-07T09:%1:00Z").arg(i, 2, 10, QLatin1Char('0'));
        const bool sms = profile == QLatin1String("twilio");
        const QString destination = sms ? QStringLiteral("+1555%1").arg(i, 7, 10, QLatin1Char('0'))
                                        : QStringLiteral("user%1@example.test").arg(i);
        // Slack counts an effect by its text, Twilio by number and text: every reminder
        // says something of its own.
        const QString body = QStringLiteral("Reminder %1: the dentist tomorrow at 10:00").arg(i);
        const QJsonObject object{
            {QStringLiteral("user_id"), user},
            {QStringLiteral("reminder_id"), reminder},
            {QStringLiteral("scheduled_at"), at},
            {QStringLiteral("destination"), destination},
            {QStringLiteral("channel"), sms ? QStringLiteral("sms") : QStringLiteral("email")},
            {QStringLiteral("event_id"), QStringLiteral("%1-evt-%2").arg(profile).arg(i)},
            {QStringLiteral("body"), body},
        };
        lines += QJsonDocument(object).toJson(QJsonDocument::Compact) + '\n';
        const QByteArray key = makeSendKey(user, reminder, at);
        QByteArray effectKey = key;
        if (profile == QLatin1String("postmark"))
            effectKey = keyWithin(key, 80); // Metadata values hold 80 characters
        else if (profile == QLatin1String("sendgrid"))
            effectKey = keyWithin(key, 1000);
        else if (profile == QLatin1String("twilio"))
            effectKey = destination.toUtf8() + '|' + body.toUtf8();
        else if (profile == QLatin1String("slack"))
            effectKey = body.toUtf8();
        sent.append({key, effectKey});
    }
    const auto result = m_once->run({QStringLiteral("enqueue"), writeFile(profile + QStringLiteral(".jsonl"), lines)});
    if (!result.exitedWith(0)) {
        qWarning("%s", result.describe().constData());
        return {};
    }
    return sent;
}

QHash<QByteArray, int> ProfileCrashTest::effectsAt(quint16 port)
{
    QString error;
    const QJsonObject effects = QJsonDocument::fromJson(httpGet(port, "/effects", &error)).object();
    if (!error.isEmpty())
        qWarning("%s", qPrintable(error));
    QHash<QByteArray, int> counts;
    for (auto it = effects.begin(); it != effects.end(); ++it)
        counts.insert(it.key().toUtf8(), it.value().toInt());
    return counts;
}

QJsonObject ProfileCrashTest::statsAt(quint16 port)
{
    QString error;
    const QJsonObject stats = QJsonDocument::fromJson(httpGet(port, "/stats", &error)).object();
    if (!error.isEmpty())
        qWarning("%s", qPrintable(error));
    return stats;
}

QHash<QByteArray, QPair<QString, QString>> ProfileCrashTest::ledger()
{
    QHash<QByteArray, QPair<QString, QString>> rows;
    const QStringList lines = storeRows(m_stores, m_once->storeUrl(),
                                        QStringLiteral("SELECT send_key, state, COALESCE(provider_request_id, '') FROM ledger"));
    for (const QString &line : lines) {
        const QStringList columns = line.split(u'|');
        rows.insert(columns.value(0).toLatin1(), {columns.value(1), columns.value(2)});
    }
    return rows;
}

QStringList ProfileCrashTest::workerArgs(const QString &partners) const
{
    // Short leases so that a killed worker's messages come back fast; fast retries.
    return {QStringLiteral("worker"),        QStringLiteral("--partners"),        partners,
            QStringLiteral("--lease"),       QStringLiteral("2"),                 QStringLiteral("--timeout"),
            QStringLiteral("1"),             QStringLiteral("--backoff-base-ms"), QStringLiteral("50"),
            QStringLiteral("--concurrency"), QStringLiteral("4")};
}

void ProfileCrashTest::crashesTakeEffectOnceThroughEveryProfile_data()
{
    QTest::addColumn<QString>("profile");
    for (const char *profile : {"webhook", "resend", "postmark", "sendgrid", "twilio", "slack"})
        QTest::newRow(profile) << QString::fromLatin1(profile);
}

void ProfileCrashTest::crashesTakeEffectOnceThroughEveryProfile()
{
    QFETCH(QString, profile);
    const bool held = keysHeld(profile);
    // A quarter of the answers are lost after the partner acted: sends in doubt without a crash.
    const quint16 port = m_once->startPartnerSim(
        {QStringLiteral("--profile"), profile, QStringLiteral("--token"),
         profile == QLatin1String("slack") ? SlackSecret : SimToken, QStringLiteral("--drop-after-accept-rate"),
         QStringLiteral("0.25")});
    QVERIFY(port != 0);
    const QString partners = partnersFile(profile, port);
    const QList<Sent> sent = enqueue(profile);
    QCOMPARE(sent.size(), Count);
    const QStringList args = workerArgs(partners);

    // 1. Killed right after the partner accepted a send, before the worker recorded it.
    const auto afterSend = m_once->waitFor(
        m_once->start(args + QStringList{QStringLiteral("--until-idle")}, {{QStringLiteral("SIM_TOKEN"), SimToken},
                                                                            {QStringLiteral("ONCE_FAILPOINT"),
                                                                             QStringLiteral("after-send")}}),
        WorkerTimeoutMs);
    QVERIFY2(afterSend.crashed(), afterSend.describe().constData());
    const qint64 effectsAtFirstCrash = statsAt(port).value(QLatin1String("effects")).toInteger();
    QVERIFY(effectsAtFirstCrash >= 1);

    // 2. Killed at a random moment: after 1 to 4 more effects at the partner, or at a
    // random time, whichever comes first.
    const qint64 killAtEffects = effectsAtFirstCrash + 1 + m_random.bounded(4);
    const int killAfterMs = 100 + int(m_random.bounded(900));
    QElapsedTimer running;
    running.start();
    QProcess *victim = m_once->start(args, m_env);
    QVERIFY(pumpUntil(
        [&] {
            return victim->state() == QProcess::NotRunning || running.hasExpired(killAfterMs)
                   || statsAt(port).value(QLatin1String("effects")).toInteger() >= killAtEffects;
        },
        WorkerTimeoutMs));
    ::kill(pid_t(victim->processId()), SIGKILL);
    const auto killed = m_once->waitFor(victim, WorkerTimeoutMs);
    const qint64 effectsAtSecondCrash = statsAt(port).value(QLatin1String("effects")).toInteger();

    // 3. A worker runs until nothing is left.
    const auto survivor = m_once->waitFor(m_once->start(args + QStringList{QStringLiteral("--until-idle")}, m_env),
                                          WorkerTimeoutMs);
    QVERIFY2(survivor.exitedWith(0), survivor.describe().constData());

    // Counted at the partner: no reminder took effect twice, nothing unknown took effect.
    QHash<QByteArray, int> effects = effectsAt(port);
    QJsonObject partnerStats = statsAt(port);
    QCOMPARE(partnerStats.value(QLatin1String("duplicate_effects")).toInteger(), 0);
    QSet<QByteArray> known;
    for (const Sent &s : sent)
        known.insert(s.effectKey);
    for (auto it = effects.cbegin(); it != effects.cend(); ++it) {
        QVERIFY2(known.contains(it.key()), it.key().constData());
        QVERIFY2(it.value() == 1, qPrintable(QStringLiteral("%1 took effect %2 times").arg(QString::fromUtf8(it.key())).arg(it.value())));
    }
    const QJsonObject stats = m_once->stats();
    VERIFY_NO_PROBLEMS(statsProblems(stats, {{QStringLiteral("ready"), 0},
                                             {QStringLiteral("in_flight"), 0},
                                             {QStringLiteral("dead"), 0},
                                             {QStringLiteral("claimed"), 0},
                                             {QStringLiteral("retrying"), 0}}));

    // The ledger agrees with the partner: applied once, or held in doubt.
    auto rows = ledger();
    QList<Sent> inDoubt;
    int inDoubtAtPartner = 0;
    for (const Sent &s : sent) {
        const QString state = rows.value(s.key).first;
        const int count = effects.value(s.effectKey);
        if (state == QLatin1String("applied")) {
            QVERIFY2(count == 1, qPrintable(QStringLiteral("%1 applied with %2 effects").arg(QString::fromLatin1(s.key)).arg(count)));
        } else {
            QVERIFY2(state == QLatin1String("in_doubt"), qPrintable(QString::fromLatin1(s.key) + QStringLiteral(": ") + state));
            inDoubt.append(s);
            inDoubtAtPartner += count;
        }
    }
    const QStringList resends = storeRows(m_stores, m_once->storeUrl(),
                                          QStringLiteral("SELECT COUNT(*) FROM attempts WHERE step = 'claim' "
                                                         "AND outcome = 'resend'"));
    const QStringList inDoubtSends = storeRows(m_stores, m_once->storeUrl(),
                                               QStringLiteral("SELECT COUNT(*) FROM attempts WHERE step = 'send' "
                                                              "AND outcome IN ('in-doubt', 'held')"));
    const int resent = resends.value(0).toInt();
    const int doubtful = inDoubtSends.value(0).toInt();
    if (held) {
        // Never resent: a claim that found the key in doubt held it.
        QCOMPARE(resent, 0);
        QVERIFY2(!inDoubt.isEmpty(), "the key accepted before the first crash is not held in doubt");
    } else {
        // Resent with the same key, and the partner's dedup made it one effect.
        QVERIFY2(inDoubt.isEmpty(), qPrintable(QString::fromLatin1(inDoubt.value(0).key)));
        QVERIFY2(resent >= 1, "no claim found the key accepted before the first crash in doubt");
        QCOMPARE(effects.size(), Count);
        QVERIFY(partnerStats.value(QLatin1String("duplicate_requests")).toInteger() >= 1);
    }

    const int heldCount = int(inDoubt.size());

    // 4. Reconcile: a partner with a lookup says which held keys it has.
    int settled = 0;
    if (hasLookup(profile)) {
        const auto reconcile = m_once->run({QStringLiteral("reconcile"), QStringLiteral("--partners"), partners,
                                            QStringLiteral("--json")},
                                           m_env);
        QVERIFY2(reconcile.exitedWith(0), reconcile.describe().constData());
        rows = ledger();
        QList<Sent> left;
        for (const Sent &s : std::as_const(inDoubt)) {
            const auto &[state, providerId] = rows.value(s.key);
            if (effects.value(s.effectKey) == 1) {
                // Found: applied, with the provider's message id.
                QVERIFY2(state == QLatin1String("applied") && !providerId.isEmpty(),
                         qPrintable(QString::fromLatin1(s.key) + QStringLiteral(": ") + state + QLatin1Char(' ')
                                    + providerId + QLatin1Char('\n') + QString::fromUtf8(reconcile.out)));
                ++settled;
            } else {
                // Not at the partner: left in doubt, for an operator.
                QCOMPARE(state, QStringLiteral("in_doubt"));
                left.append(s);
            }
        }
        inDoubt = left;
    }

    // 5. An operator resolves what is left: delivered where the provider's console shows
    // the message (the partner's own count here), resent where it does not. A resend may
    // lose its answer again (the partner still drops some) and be held again.
    int markedDelivered = 0;
    int resentByOperator = 0;
    for (int round = 0; round < 5 && !inDoubt.isEmpty(); ++round) {
        bool resending = false;
        for (const Sent &s : std::as_const(inDoubt)) {
            const bool atPartner = effectsAt(port).value(s.effectKey) == 1;
            const auto resolve = m_once->run({QStringLiteral("resolve"), QString::fromLatin1(s.key),
                                              atPartner ? QStringLiteral("--mark-delivered") : QStringLiteral("--resend")});
            QVERIFY2(resolve.exitedWith(0), resolve.describe().constData());
            ++(atPartner ? markedDelivered : resentByOperator);
            resending = resending || !atPartner;
        }
        if (resending) {
            const auto last = m_once->waitFor(m_once->start(args + QStringList{QStringLiteral("--until-idle")}, m_env),
                                              WorkerTimeoutMs);
            QVERIFY2(last.exitedWith(0), last.describe().constData());
        }
        rows = ledger();
        QList<Sent> left;
        for (const Sent &s : std::as_const(inDoubt)) {
            if (rows.value(s.key).first == QLatin1String("in_doubt"))
                left.append(s);
        }
        inDoubt = left;
    }

    // Every reminder took effect, once.
    effects = effectsAt(port);
    partnerStats = statsAt(port);
    for (const Sent &s : sent)
        QVERIFY2(effects.value(s.effectKey) == 1, qPrintable(QStringLiteral("%1: %2 effects").arg(QString::fromLatin1(s.key)).arg(effects.value(s.effectKey))));
    QCOMPARE(effects.size(), Count);
    QCOMPARE(partnerStats.value(QLatin1String("duplicate_effects")).toInteger(), 0);
    rows = ledger();
    for (const Sent &s : sent)
        QCOMPARE(rows.value(s.key).first, QStringLiteral("applied"));

    qInfo("%s: %d reminders; killed after-send (%lld effects by then) and at random (%s, %lld effects by then); "
          "%lld answers dropped after acting; %d sends in doubt, %d claims resent; %d held (%d at the partner), "
          "%d settled by reconcile, %d marked delivered, %d resent by the operator; %lld requests, %lld effects, "
          "%lld duplicate effects",
          qPrintable(profile), Count, effectsAtFirstCrash, killed.crashed() ? "SIGKILL" : "had finished",
          effectsAtSecondCrash, partnerStats.value(QLatin1String("dropped")).toInteger(), doubtful, resent,
          heldCount, inDoubtAtPartner, settled, markedDelivered, resentByOperator,
          partnerStats.value(QLatin1String("requests")).toInteger(), partnerStats.value(QLatin1String("effects")).toInteger(),
          partnerStats.value(QLatin1String("duplicate_effects")).toInteger());
}

// Resend keeps an idempotency key for 24 hours. A key left in doubt whose first send is
// older than that must be held, not resent: the partner may have forgotten the key and
// would act again. The first worker dies right after Resend accepted; the ledger is then
// moved a day back, as if the message had come back only now, and the simulator keeps
// keys 300 ms, so that it too has forgotten the key by the time of the next claim.
void ProfileCrashTest::aKeyInDoubtLongerThanResendKeepsItIsHeld()
{
    const quint16 port = m_once->startPartnerSim({QStringLiteral("--profile"), QStringLiteral("resend"),
                                                  QStringLiteral("--token"), SimToken,
                                                  QStringLiteral("--key-window-ms"), QStringLiteral("300")});
    QVERIFY(port != 0);
    const QString partners = partnersFile(QStringLiteral("resend"), port);
    const QList<Sent> sent = enqueue(QStringLiteral("resend"));
    QCOMPARE(sent.size(), Count);
    QStringList args = workerArgs(partners);
    args << QStringLiteral("--concurrency") << QStringLiteral("1") << QStringLiteral("--until-idle");

    QElapsedTimer sinceFirstSend;
    sinceFirstSend.start();
    const auto crashed = m_once->waitFor(
        m_once->start(args, {{QStringLiteral("SIM_TOKEN"), SimToken}, {QStringLiteral("ONCE_FAILPOINT"), QStringLiteral("after-send")}}),
        WorkerTimeoutMs);
    QVERIFY2(crashed.crashed(), crashed.describe().constData());
    const auto effects = effectsAt(port);
    QCOMPARE(effects.size(), 1);
    const QByteArray accepted = effects.cbegin().key();

    // A day and an hour ago: the key's claim, and (had one been recorded) its first send.
    VERIFY_NO_PROBLEMS(ageLedger(QStringLiteral("send_key = '%1'").arg(QString::fromLatin1(accepted)), 1));
    // The simulator's window must have passed too; nothing but time can say it has.
    QVERIFY(pumpUntil([&] { return sinceFirstSend.hasExpired(400); }, 5000));

    const auto survivor = m_once->waitFor(m_once->start(args, m_env), WorkerTimeoutMs);
    QVERIFY2(survivor.exitedWith(0), survivor.describe().constData());

    const auto after = effectsAt(port);
    QCOMPARE(after.value(accepted), 1);
    QCOMPARE(after.size(), Count);
    QCOMPARE(statsAt(port).value(QLatin1String("duplicate_effects")).toInteger(), 0);
    const auto rows = ledger();
    QCOMPARE(rows.value(accepted).first, QStringLiteral("in_doubt"));
    const QStringList why = storeRows(m_stores, m_once->storeUrl(),
                                      QStringLiteral("SELECT outcome, error FROM attempts WHERE step = 'claim' "
                                                     "AND send_key = '%1'")
                                          .arg(QString::fromLatin1(accepted)));
    const QString story = why.join(QLatin1Char('\n'));
    QVERIFY2(!story.contains(QLatin1String("resend|")), qPrintable(story));
    QVERIFY2(story.contains(QRegularExpression(QStringLiteral("^held\\|.*keeps a key 24 h"),
                                               QRegularExpression::MultilineOption)),
             qPrintable(story));
    for (const Sent &s : sent) {
        if (s.key != accepted)
            QCOMPARE(rows.value(s.key).first, QStringLiteral("applied"));
    }
}

// The same, when the send in doubt was answered (the connection dropped after Resend acted)
// and the worker put the key back to retry it: the workers stop before the retry, and the
// next one comes a day later. The retry would be the resend of a send in doubt, to a
// partner that has forgotten the key: it is held.
void ProfileCrashTest::aKeyRetryingAfterASendInDoubtForADayIsHeld()
{
    const quint16 port = m_once->startPartnerSim({QStringLiteral("--profile"), QStringLiteral("resend"),
                                                  QStringLiteral("--token"), SimToken,
                                                  QStringLiteral("--key-window-ms"), QStringLiteral("300"),
                                                  QStringLiteral("--drop-after-accept-rate"), QStringLiteral("1")});
    QVERIFY(port != 0);
    const QString partners = partnersFile(QStringLiteral("resend"), port);
    // Fewer than the five failures in a row that open the worker's breaker.
    constexpr int Few = 3;
    const QList<Sent> sent = enqueue(QStringLiteral("resend"), Few);
    QCOMPARE(sent.size(), Few);
    QElapsedTimer sinceFirstSend;
    sinceFirstSend.start();
    // Retries a second and a half later: time to stop the worker once every send is in doubt.
    QProcess *worker = m_once->start(workerArgs(partners) + QStringList{QStringLiteral("--backoff-base-ms"),
                                                                        QStringLiteral("1500")},
                                     m_env);
    const QString inDoubtSends = QStringLiteral("SELECT COUNT(DISTINCT send_key) FROM attempts WHERE step = 'send' "
                                                "AND outcome = 'in-doubt'");
    QVERIFY2(pumpUntil([&] { return storeRows(m_stores, m_once->storeUrl(), inDoubtSends).value(0).toInt() == Few; },
                       WorkerTimeoutMs),
             qPrintable(storeRows(m_stores, m_once->storeUrl(), inDoubtSends).value(0)));
    ::kill(pid_t(worker->processId()), SIGKILL);
    m_once->waitFor(worker, WorkerTimeoutMs);
    QCOMPARE(effectsAt(port).size(), Few);
    QCOMPARE(statsAt(port).value(QLatin1String("effects")).toInteger(), qint64(Few));

    VERIFY_NO_PROBLEMS(ageLedger(QStringLiteral("state = 'retrying'"), Few));
    QVERIFY(pumpUntil([&] { return sinceFirstSend.hasExpired(400); }, 5000));
    const auto survivor = m_once->waitFor(
        m_once->start(workerArgs(partners) + QStringList{QStringLiteral("--until-idle")}, m_env), WorkerTimeoutMs);
    QVERIFY2(survivor.exitedWith(0), survivor.describe().constData());

    const auto effects = effectsAt(port);
    QCOMPARE(statsAt(port).value(QLatin1String("duplicate_effects")).toInteger(), 0);
    const auto rows = ledger();
    for (const Sent &s : sent) {
        QCOMPARE(effects.value(s.effectKey), 1);
        QCOMPARE(rows.value(s.key).first, QStringLiteral("in_doubt"));
    }
    const QStringList held = storeRows(m_stores, m_once->storeUrl(),
                                       QStringLiteral("SELECT error FROM attempts WHERE step = 'claim' AND outcome = 'held'"));
    QCOMPARE(held.size(), Few);
    QVERIFY2(held.first().startsWith(QLatin1String("a send of this key was in doubt; the partner keeps a key 24 h")),
             qPrintable(held.first()));
}

QString ProfileCrashTest::ageLedger(const QString &where, int expectedRows)
{
    constexpr qint64 DayAndAnHourMs = 25LL * 3600 * 1000;
    QString problem;
    {
        QSqlDatabase db = m_stores.openRaw(m_once->storeUrl(), QStringLiteral("age-the-ledger"));
        QSqlQuery query(db);
        // A key's history is found under its created_at (attempts.key_created_at): it moves too.
        const QString history = QStringLiteral("UPDATE attempts SET key_created_at = key_created_at - %1 WHERE "
                                               "send_key IN (SELECT send_key FROM ledger WHERE %2)")
                                    .arg(DayAndAnHourMs)
                                    .arg(where);
        const QString sql = QStringLiteral("UPDATE ledger SET created_at = created_at - %1, claimed_at = claimed_at - %1, "
                                           "first_sent_at = first_sent_at - %1 WHERE ")
                                .arg(DayAndAnHourMs)
                            + where;
        if (!db.isOpen())
            problem = db.lastError().text();
        else if (!query.exec(history))
            problem = history + QStringLiteral(": ") + query.lastError().text();
        else if (!query.exec(sql))
            problem = sql + QStringLiteral(": ") + query.lastError().text();
        else if (query.numRowsAffected() != expectedRows)
            problem = QStringLiteral("%1 rows aged, expected %2").arg(query.numRowsAffected()).arg(expectedRows);
        db.close();
    }
    QSqlDatabase::removeDatabase(QStringLiteral("age-the-ledger"));
    return problem;
}

QTEST_GUILESS_MAIN(ProfileCrashTest)
#include "tst_profilecrash.moc"
