#pragma once

#include <QObject>
#include <QTimer>

#include <memory>

namespace once {

class Store;

// Publishes realistic reminders for the demo: a steady trickle with bursts, one in
// twenty published twice, a recurring reminder, and now and then a malformed message.
// Lives on its own thread with its own store connection (call start() there).
class DemoProducer final : public QObject
{
    Q_OBJECT
    Q_DISABLE_COPY_MOVE(DemoProducer)

public:
    explicit DemoProducer(const QString &storeUrl, int perSecond = 20, QObject *parent = nullptr);
    ~DemoProducer() override;

    qint64 published() const { return m_published; }

public slots:
    void start();
    void stop();

signals:
    void errorOccurred(const QString &message);

private:
    void publishBatch();

    QString m_storeUrl;
    int m_perSecond = 20;
    std::unique_ptr<Store> m_store;
    QTimer m_timer{this}; // a child, so that moveToThread() takes it along
    qint64 m_published = 0;
    qint64 m_sequence = 0;
};

} // namespace once
