#include "settingsdialog.h"

#include "settings.h"

#include <QDialogButtonBox>
#include <QFormLayout>
#include <QSpinBox>

namespace once::ui {

SettingsDialog::SettingsDialog(QWidget *parent) : QDialog(parent)
{
    setWindowTitle(tr("Settings"));
    Settings settings;
    m_oldestAge = new QSpinBox;
    m_oldestAge->setRange(5, 7 * 24 * 3600);
    m_oldestAge->setSuffix(tr(" s"));
    m_oldestAge->setValue(settings.oldestAgeAlertSeconds());
    m_failingSends = new QSpinBox;
    m_failingSends->setRange(2, 100);
    m_failingSends->setValue(settings.failingEventAlertSends());
    m_idempotencyWindow = new QSpinBox;
    m_idempotencyWindow->setRange(1, 24 * 90);
    m_idempotencyWindow->setSuffix(tr(" h"));
    m_idempotencyWindow->setValue(settings.idempotencyWindowHours());
    m_redriveRate = new QSpinBox;
    m_redriveRate->setRange(1, 100000);
    m_redriveRate->setSuffix(tr(" /s"));
    m_redriveRate->setValue(settings.redriveRate());

    auto *form = new QFormLayout;
    form->addRow(tr("Alert when the oldest ready message is older than"), m_oldestAge);
    form->addRow(tr("Alert when one event has failed this many sends"), m_failingSends);
    form->addRow(tr("Partner keeps idempotency keys for"), m_idempotencyWindow);
    form->addRow(tr("Default redrive rate"), m_redriveRate);
    auto *buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    auto *layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(buttons);
}

void SettingsDialog::accept()
{
    Settings settings;
    settings.setOldestAgeAlertSeconds(m_oldestAge->value());
    settings.setFailingEventAlertSends(m_failingSends->value());
    settings.setIdempotencyWindowHours(m_idempotencyWindow->value());
    settings.setRedriveRate(m_redriveRate->value());
    QDialog::accept();
}

} // namespace once::ui
