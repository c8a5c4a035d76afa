#include "sim/demoproducer.h"

#include "model/reminder.h"
#include "store/store.h"

#include <QDateTime>
#include <QRandomGenerator>
#include <QTimeZone>

namespace once {

namespace {

const char *const Channels[] = {"sms", "email", "webhook"};
const char *const Reminders[] = {"dentist", "renewal", "payment-due", "class-tomorrow", "pickup", "check-in"};

} // namespace

DemoProducer::DemoProducer(const QString &storeUrl, int perSecond, QObject *parent)
    : QObject(parent), m_storeUrl(storeUrl), m_perSecond(perSecond)
{
    m_timer.setInterval(250);
    connect(&m_timer, &QTimer::timeout, this, &DemoProducer::publishBatch);
}

DemoProducer::~DemoProducer() = default;

void DemoProducer::start()
{
    QString error;
    m_store = Store::open(m_storeUrl, &error);
    if (!m_store) {
        emit errorOccurred(error);
        return;
    }
    m_timer.start();
}

void DemoProducer::stop()
{
    m_timer.stop();
    m_store.reset();
}

void DemoProducer::publishBatch()
{
    auto *random = QRandomGenerator::global();
    // A quarter of a second's worth, with the odd burst of three times as many.
    int count = std::max(1, m_perSecond / 4);
    if (random->bounded(20) == 0)
        count *= 3;
    QList<OutgoingMessage> batch;
    const QDateTime now = QDateTime::currentDateTimeUtc();
    for (int i = 0; i < count; ++i) {
        const qint64 n = ++m_sequence;
        const int user = int(random->bounded(400));
        const char *channel = Channels[n % 3];
        const QString destination = QLatin1String(channel) == QLatin1String("email")
                                        ? QStringLiteral("user%1@example.com").arg(user)
                                        : QLatin1String(channel) == QLatin1String("sms")
                                              ? QStringLiteral("+1555%1").arg(user, 7, 10, QLatin1Char('0'))
                                              : QStringLiteral("https://hooks.example.com/u/%1").arg(user);
        // Scheduled a little in the past, so lateness is realistic.
        const QString scheduled = now.addSecs(-qint64(random->bounded(30))).toString(Qt::ISODate);
        QByteArray line = QStringLiteral(R"({"user_id":"user-%1","reminder_id":"%2-%3","scheduled_at":"%4",)"
                                         R"("destination":"%5","channel":"%6","event_id":"evt-%7",)"
                                         R"("body":"Reminder %3 for user-%1"})")
                              .arg(user)
                              .arg(QLatin1String(Reminders[n % 6]))
                              .arg(n)
                              .arg(scheduled, destination, QLatin1String(channel))
                              .arg(n)
                              .toUtf8();
        if (n % 500 == 0)
            line = R"({"user_id":"user-broken","reminder_id":"broken",)"; // a producer bug, now and then
        const auto parsed = parseReminder(line);
        const OutgoingMessage message{line, parsed.reminder ? parsed.reminder->sendKey : QByteArray(),
                                      parsed.reminder ? parsed.reminder->eventId : QString(), 0, 0};
        batch.append(message);
        if (n % 20 == 0)
            batch.append(message); // published twice: the queue's at-least-once in action
    }
    QString error;
    if (!m_store->queue().enqueue(batch, &error)) {
        emit errorOccurred(error);
        return;
    }
    m_published += batch.size();
}

} // namespace once
